package fanout

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"sync"
	"time"

	backendsrv "github.com/mcprouter/mcprouter/cmd/mcpbackend/server"
	"github.com/mcprouter/mcprouter/cmd/mcprouter/app"
	"github.com/mcprouter/mcprouter/transport/natsbus"
)

// Target is the system under test as the harness drives it: two router instances on one
// NATS, a backend behind them, and the NATS server the raw comparison uses. It runs in
// this process (Servers) or in a child process (Child) when one process cannot hold the
// sockets of both ends.
type Target interface {
	Endpoints() Endpoints
	// Stats reads the routers' counters.
	Stats() (ServerStats, error)
	// CPU is the CPU time (user and system) the servers' process used so far.
	CPU() (time.Duration, error)
	// InProcess reports whether the servers run in the calling process (their CPU time
	// then includes the clients').
	InProcess() bool
	// StartCPUProfile and StopCPUProfile profile the process the servers run in.
	StartCPUProfile(path string) error
	StopCPUProfile() error
	Close() error
}

// Endpoints are the addresses the clients use.
type Endpoints struct {
	Routers []string `json:"routers"` // Streamable HTTP URLs of the router instances
	NATS    string   `json:"nats"`    // client URL of the NATS server the routers share
	Floor   string   `json:"floor"`   // host:port of the TCP floor (floor.go)
}

// ServerStats are the routers' counters that tell whether deliveries were lost on the
// way and who held the upstream subscription.
type ServerStats struct {
	FanOut        uint64 `json:"fan_out"`        // updates handed to sessions, all instances
	SlowConsumers uint64 `json:"slow_consumers"` // GET streams cut off as too slow
	OpenStreams   int64  `json:"open_streams"`
	Upstream      []int  `json:"upstream"` // upstream subscriptions held, per instance
}

// ServerConfig configures the servers.
type ServerConfig struct {
	// Sessions is the largest number of client sessions expected; the routers' session
	// limits are raised to fit it. Default 10000.
	Sessions int
	// NoPersist turns off the routers' session records and GET stream event log in
	// JetStream (sessions.no_persist). By default they are on, as in a default router.
	NoPersist bool
	// Logger receives the servers' logs. Default: discarded.
	Logger *slog.Logger
}

// Servers are the backend and two router instances running in this process. The first
// instance runs the embedded NATS server, open on a loopback port; the second joins it
// as a client, as a second router process would.
type Servers struct {
	Backend *backendsrv.Server
	Routers [2]*app.App
	floor   *floorServer
	natsURL string // the shared NATS server's client URL, credentials included

	profMu sync.Mutex
	prof   cpuProfile // under profMu
}

// StartServers starts the backend, then the two router instances, each with the backend
// behind it under its own names (empty prefix), so that the tool is called "touch".
func StartServers(cfg ServerConfig) (*Servers, error) {
	if cfg.Sessions <= 0 {
		cfg.Sessions = 10000
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	s := &Servers{}
	b, err := backendsrv.New(backendsrv.Config{
		Name: "ref", Tick: -1, Logger: log,
		// Each router instance holds one upstream session (shared mode); a few more
		// for a restart of either.
		MaxSessions: 64,
	})
	if err != nil {
		return nil, err
	}
	if err := b.Listen("127.0.0.1:0"); err != nil {
		return nil, err
	}
	s.Backend = b
	// The first router's embedded NATS listens, and requires credentials.
	user, password := "fanout", fmt.Sprintf("%x", time.Now().UnixNano())
	for i := range s.Routers {
		nc := natsbus.Config{Name: fmt.Sprintf("fanout-%c", 'a'+i), User: user, Password: password}
		if i == 0 {
			nc.Listen = "127.0.0.1:0"
		} else {
			nc.URL = s.Routers[0].Bus.ClientURL()
		}
		prefix := ""
		rc := app.Config{
			Listen:   "127.0.0.1:0",
			Backends: []app.BackendConfig{{Name: "ref", URL: b.URL(), Prefix: &prefix}},
			NATS:     nc,
			// One load generator on loopback opens every session: no per-address quota,
			// initialize rate limit or connection cap.
			Sessions:    app.SessionsConfig{Max: cfg.Sessions + 64, NoPersist: cfg.NoPersist, MaxPerClient: -1, InitRate: -1},
			Connections: app.ConnectionsConfig{MaxPerAddress: -1},
			// A quick shutdown: the streams are closed by the clients first.
			ShutdownGrace: 5 * time.Second,
		}
		a, err := app.New(rc, log)
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("fanout: router %d: %w", i, err)
		}
		a.Start(20 * time.Second)
		if err := a.Listen(); err != nil {
			a.Shutdown(context.Background())
			s.Close()
			return nil, fmt.Errorf("fanout: router %d: %w", i, err)
		}
		s.Routers[i] = a
	}
	if s.floor, err = startFloor(); err != nil {
		s.Close()
		return nil, err
	}
	u, err := url.Parse(s.Routers[0].Bus.ClientURL())
	if err != nil || u.Host == "" {
		s.Close()
		return nil, errors.New("fanout: the embedded NATS server opened no client port")
	}
	u.User = url.UserPassword(user, password)
	s.natsURL = u.String()
	return s, nil
}

// Endpoints implements Target.
func (s *Servers) Endpoints() Endpoints {
	return Endpoints{
		Routers: []string{s.Routers[0].URL(), s.Routers[1].URL()},
		NATS:    s.natsURL,
		Floor:   s.floor.addr(),
	}
}

// Stats implements Target.
func (s *Servers) Stats() (ServerStats, error) {
	var st ServerStats
	for _, a := range s.Routers {
		if a == nil {
			continue
		}
		if a.Fleet != nil {
			st.FanOut += a.Fleet.Stats.FanOut.Load()
			st.Upstream = append(st.Upstream, a.Fleet.Subscriptions())
		}
		st.SlowConsumers += a.HTTP.Stats.SlowConsumers.Load()
		st.OpenStreams += a.HTTP.Stats.OpenStreams.Load()
	}
	return st, nil
}

// CPU implements Target: this process's CPU time.
func (s *Servers) CPU() (time.Duration, error) { return processCPU(), nil }

// InProcess implements Target.
func (s *Servers) InProcess() bool { return true }

// StartCPUProfile implements Target: a CPU profile of this whole process.
func (s *Servers) StartCPUProfile(path string) error {
	s.profMu.Lock()
	defer s.profMu.Unlock()
	return s.prof.start(path)
}

// StopCPUProfile implements Target.
func (s *Servers) StopCPUProfile() error {
	s.profMu.Lock()
	defer s.profMu.Unlock()
	return s.prof.stop()
}

// Close stops the routers (the second first: it depends on the first one's NATS
// server), then the backend.
func (s *Servers) Close() error {
	s.StopCPUProfile()
	if s.floor != nil {
		s.floor.close()
		s.floor = nil
	}
	var errs []error
	for i := len(s.Routers) - 1; i >= 0; i-- {
		if a := s.Routers[i]; a != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			if err := a.Shutdown(ctx); err != nil && !errors.Is(err, context.Canceled) {
				errs = append(errs, fmt.Errorf("router %d: %w", i, err))
			}
			cancel()
			s.Routers[i] = nil
		}
	}
	if s.Backend != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := s.Backend.Close(ctx); err != nil {
			errs = append(errs, fmt.Errorf("backend: %w", err))
		}
		cancel()
		s.Backend = nil
	}
	return errors.Join(errs...)
}
