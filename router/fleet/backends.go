package fleet

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bytedance/sonic"

	"github.com/mcprouter/mcprouter/internal/ctxtime"
	"github.com/mcprouter/mcprouter/router"
	"github.com/mcprouter/mcprouter/transport/upstream"
)

// Backends and their instances. A backend owns its instances, its concurrency slots
// (acquire/release, taken by forward) and its capabilities; an instance owns its shared
// upstream session, kept up and health-checked by its maintainer goroutine (maintain,
// started by Start, ended by Close). Forwarding calls pick and acquire from any worker.

// upkeep is what instances' maintainers need of the rest of the fleet: how to open a
// shared session (conns) and ping it (table), the health check's timing, and whom to
// tell when a session is lost (the forwarder fails its requests), comes up (the
// catalog is fetched, subscriptions restored) or an instance stops taking requests
// (its subscriptions move). One upkeep serves every backend; it holds no state.
type upkeep struct {
	conns    *connector
	table    *table
	log      *slog.Logger
	interval time.Duration // Config.HealthInterval
	timeout  time.Duration // Config.HealthTimeout
	lost     func(c *upConn, cause error)
	up       func(in *instance, c *upConn)
	failover func(in *instance)
}

// backend is one configured backend: its instances, its share of the catalog, and the
// limit on its requests in flight.
type backend struct {
	keep      *upkeep
	cfg       BackendConfig
	index     int // the Observer's index of it: its position in the first configuration
	instances []*instance
	sem       chan struct{}

	// ctx ends the backend's maintainers (stop, on removal by Reconfigure, or the
	// fleet's Close); running counts them.
	ctx     context.Context
	stop    context.CancelFunc
	running sync.WaitGroup
	// late: added by Reconfigure, so its first lists are news to clients already
	// connected (a replacement only once it takes the old one's place). retired:
	// removed by Reconfigure, draining its calls.
	late    atomic.Bool
	retired atomic.Bool
	// drained is poked when a client's request to the backend leaves the in-flight
	// table: a retirement waits on it for the clients' calls to end
	// (upkeep_reconfigure.go).
	drained drainSignal

	// caps is the capabilities object of the backend's initialize result (from the first
	// instance that answered), raw.
	mu   sync.Mutex
	caps []byte

	// lists is the backend's last fetched catalog; listed is closed once the fleet's
	// catalog includes the first one (Start waits on it).
	lists    atomic.Pointer[[numKinds][]item]
	listed   chan struct{}
	listOnce sync.Once
}

// markListed closes listed, once: the catalog now includes the backend's lists.
func (b *backend) markListed() { b.listOnce.Do(func() { close(b.listed) }) }

// instance is one replica or child process of a backend.
type instance struct {
	b      *backend
	n      int
	dialer Dialer

	conn        atomic.Pointer[upConn] // the shared session; nil while down
	era         atomic.Uint32          // eraUnknown, eraLegacy, eraModern (era.go)
	healthy     atomic.Bool
	outstanding atomic.Int64
	failures    int // consecutive failed health checks (health goroutine only)

	Ejections atomic.Uint64
	Reconnect atomic.Uint64
	Renewed   atomic.Uint64 // upstream sessions re-established after a backend restart
}

// pick chooses a healthy instance with a live shared session: the less loaded of two
// picked at random (power of two choices), which spreads load about as well as least
// outstanding requests without scanning every instance.
func (b *backend) pick() *instance {
	n := len(b.instances)
	if n == 1 {
		if in := b.instances[0]; in.usable() {
			return in
		}
		return nil
	}
	i, j := rand.IntN(n), rand.IntN(n-1)
	if j >= i {
		j++
	}
	a, c := b.instances[i], b.instances[j]
	au, cu := a.usable(), c.usable()
	switch {
	case au && cu:
		if c.outstanding.Load() < a.outstanding.Load() {
			return c
		}
		return a
	case au:
		return a
	case cu:
		return c
	}
	// Both picks were down: fall back to the first usable instance.
	for _, in := range b.instances {
		if in.usable() {
			return in
		}
	}
	return nil
}

func (in *instance) usable() bool {
	if !in.healthy.Load() {
		return false
	}
	if in.b.cfg.PerClient {
		return true
	}
	c := in.conn.Load()
	return c != nil && !c.dead()
}

// acquire takes one of the backend's concurrency slots, waiting at most d.
func (b *backend) acquire(d time.Duration) bool {
	select {
	case b.sem <- struct{}{}:
		return true
	default:
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case b.sem <- struct{}{}:
		return true
	case <-t.C:
		return false
	}
}

func (b *backend) release() { <-b.sem }

// connect dials the instance's shared session and performs the handshake.
func (in *instance) connect(ctx context.Context) (*upConn, error) {
	return in.b.keep.conns.open(ctx, in, nil)
}

// maintain keeps the instance's shared session up and checks its health with ping,
// until ctx ends. A failing instance is ejected from load balancing and brought back
// when it answers again.
func (in *instance) maintain(ctx context.Context) {
	k := in.b.keep
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		// Every instance keeps a shared session, per-client backends too: it is how the
		// router reads the catalog (and hears of its changes) and checks health; in
		// per-client mode clients' requests still travel on their own sessions.
		{
			c := in.conn.Load()
			if c == nil || c.dead() {
				if c != nil {
					in.conn.Store(nil)
					k.lost(c, c.conn.Err())
				}
				in.healthy.Store(false)
				cctx, cancel := context.WithTimeout(ctx, k.timeout*5)
				nc, err := in.connect(cctx)
				cancel()
				if err != nil {
					k.log.Warn("backend instance unreachable", "backend", in.b.cfg.Name, "instance", in.dialer.Addr, "err", err, "retry_in", backoff)
					if !ctxtime.Sleep(ctx, backoff) {
						return
					}
					backoff = min(backoff*2, 10*time.Second)
					continue
				}
				backoff = 100 * time.Millisecond
				in.Reconnect.Add(1)
				in.conn.Store(nc)
				in.healthy.Store(true)
				in.failures = 0
				k.log.Info("backend instance connected", "backend", in.b.cfg.Name, "instance", in.dialer.Addr, "protocol", nc.version)
				k.up(in, nc)
			}
		}
		if !ctxtime.Sleep(ctx, k.interval) {
			return
		}
		in.check(ctx)
		if !in.usable() {
			k.failover(in)
		}
	}
}

// check pings the instance once and ejects it after two failures in a row.
func (in *instance) check(ctx context.Context) {
	c := in.conn.Load()
	if c == nil {
		return
	}
	k := in.b.keep
	pctx, cancel := context.WithTimeout(ctx, k.timeout)
	res, err := k.table.call(pctx, c, healthMethod(c), nil)
	cancel()
	if !stillModern(c, res, err) {
		k.log.Info("backend no longer speaks 2026-07-28: reconnecting", "backend", in.b.cfg.Name, "instance", in.dialer.Addr)
		c.kill()
		return
	}
	if err == nil {
		if !in.healthy.Load() {
			k.log.Info("backend instance healthy again", "backend", in.b.cfg.Name, "instance", in.dialer.Addr)
		}
		recovered := in.failures > 0
		in.failures = 0
		in.healthy.Store(true)
		if recovered {
			// Failed checks and then an answer: the backend may have restarted as
			// another era (era.go).
			rctx, cancel := context.WithTimeout(ctx, k.timeout)
			k.conns.recheck(rctx, c)
			cancel()
		}
		return
	}
	if ctx.Err() != nil {
		return
	}
	in.failures++
	if in.failures >= 2 && in.healthy.Load() {
		in.healthy.Store(false)
		in.Ejections.Add(1)
		k.log.Warn("backend instance ejected: health check failed", "backend", in.b.cfg.Name, "instance", in.dialer.Addr, "err", err)
	}
	if errors.Is(err, upstream.ErrClosed) || errors.Is(err, upstream.ErrSessionExpired) {
		c.kill()
		return
	}
	if !errors.Is(err, upstream.ErrBackendDown) {
		// Something answered, but not as the session expects: a backend that came back
		// speaking only 2026-07-28 refuses a 2025 request (era.go).
		rctx, cancel := context.WithTimeout(ctx, k.timeout)
		k.conns.recheck(rctx, c)
		cancel()
	}
}

// AppendCapabilities implements router.Fleet: the union of what the backends offer. A
// fleet with no backends (a router waiting for a reload to add them) offers the three
// lists, empty, with listChanged: its clients are told when backends come.
func (f *Fleet) AppendCapabilities(dst []byte, version string) []byte {
	var tools, prompts, resources, subscribe, completions bool
	set := f.set.all()
	if len(set) == 0 {
		tools, prompts, resources = true, true, true
	}
	for _, b := range set {
		b.mu.Lock()
		caps := b.caps
		b.mu.Unlock()
		tools = tools || hasMember(caps, "tools")
		prompts = prompts || hasMember(caps, "prompts")
		resources = resources || hasMember(caps, "resources")
		completions = completions || hasMember(caps, "completions")
		if hasMember(caps, "resources") {
			if n, err := sonicGetBool(caps, "resources", "subscribe"); err == nil && n {
				subscribe = true
			}
		}
	}
	if tools {
		dst = append(dst, `,"tools":{"listChanged":true}`...)
	}
	if prompts {
		dst = append(dst, `,"prompts":{"listChanged":true}`...)
	}
	if resources {
		dst = append(dst, `,"resources":{"listChanged":true`...)
		if subscribe {
			dst = append(dst, `,"subscribe":true`...)
		}
		dst = append(dst, '}')
	}
	if completions {
		dst = append(dst, `,"completions":{}`...)
	}
	return dst
}

// SetLogLevel implements router.Fleet: the level goes to every backend the session uses.
// On shared upstream sessions it applies to every client of that session: the last
// setLevel wins, which is what a shared session can offer.
func (f *Fleet) SetLogLevel(s *router.Session, level string) {
	// 2026-07-28 backends get the level in each of the session's requests.
	f.conns.setLevel(s, level)
	params := append([]byte(`{"level":`), '"')
	params = append(params, level...)
	params = append(params, `"}`...)
	for _, b := range f.set.all() {
		b.mu.Lock()
		logging := hasMember(b.caps, "logging")
		b.mu.Unlock()
		if !logging {
			continue
		}
		for _, in := range b.instances {
			c := in.conn.Load()
			if b.cfg.PerClient {
				c = f.sessions.state(s).conn(in)
			}
			if c == nil || c.dead() || c.modern {
				continue
			}
			f.life.spawn(func() {
				ctx, cancel := context.WithTimeout(f.life.ctx, b.cfg.Timeout)
				defer cancel()
				if _, err := f.table.call(ctx, c, "logging/setLevel", params); err != nil {
					f.log.Debug("logging/setLevel not accepted", "backend", b.cfg.Name, "err", err)
				}
			})
		}
	}
}

func sonicGetBool(obj []byte, path ...any) (bool, error) {
	n, err := sonic.Get(obj, path...)
	if err != nil {
		return false, err
	}
	return n.Bool()
}
