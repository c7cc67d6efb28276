// Package natsbus is mcprouter's connection to NATS, its distributed engine: an embedded
// NATS server started in-process by default (no port opened unless asked), or an existing
// NATS cluster, plus the subject layout the router instances share.
//
// Subject layout, under a per-cluster prefix P (default "mcpr"):
//
//	P.res.<key>             a backend's notifications/resources/updated for one (backend, URI);
//	                        <key> is a hash of both (URIs do not fit in subject tokens)
//	P.changed.<backend>     a backend's */list_changed: every instance refreshes its catalog
//	P.sess.<session id>     messages for one client session, wherever it is connected
//
// Key-value buckets (JetStream), when available:
//
//	P_subs       upstream subscription leases: s.<key>.owner (the instance holding the one
//	             upstream subscription) and s.<key>.m.<instance> (instances with subscribers)
//	P_sessions   client session records, so that a session survives its instance
package natsbus

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Config says which NATS to use. The zero value runs an embedded server with no port.
type Config struct {
	// URL of an existing NATS cluster ("nats://host:4222,nats://other:4222"). Empty runs
	// an embedded server.
	URL string `yaml:"url"`
	// Listen makes the embedded server accept clients (other router instances, NATS
	// backends) on this address. Empty: in-process only.
	Listen string `yaml:"listen"`
	// Cluster joins embedded servers into one NATS cluster (routes between them).
	Cluster ClusterConfig `yaml:"cluster"`
	// Prefix of every subject and bucket; one per router cluster. Default "mcpr".
	Prefix string `yaml:"prefix"`
	// Name of this router instance (server name of the embedded server, instance id in
	// leases). Default: random.
	Name string `yaml:"name"`
	// Credentials. With an external cluster (url): the router's own, a .creds file, or
	// user and password, or a token. With an embedded server that listens (listen): the
	// credentials it requires of every client (other router instances, NATS backends):
	// user and password, or a token, or nkeys. A listening embedded server without
	// credentials refuses to start: its subjects carry session records and backend
	// traffic.
	Creds    string `yaml:"creds"`
	User     string `yaml:"user"`
	Password string `yaml:"password"`
	Token    string `yaml:"token"`
	// NKeys are the public user nkeys (U...) an embedded server that listens accepts;
	// their clients sign the server's challenge with the seed.
	NKeys []string `yaml:"nkeys"`
	// TLS. With an external cluster: CA to trust, and a client certificate. With an
	// embedded server that listens: its certificate and key, and ca, when set, the CA
	// client certificates must chain to (mutual TLS).
	TLS TLSConfig `yaml:"tls"`
	// JetStream bounds what the router keeps in JetStream.
	JetStream JetStreamConfig `yaml:"jetstream"`
	// StoreDir holds the embedded server's JetStream data. Default: a temporary
	// directory removed on Close.
	StoreDir string `yaml:"store_dir"`
	// NoJetStream disables JetStream in the embedded server (no leases, no session
	// records: each instance then manages its own upstream subscriptions).
	NoJetStream bool `yaml:"no_jetstream"`
	// Replicas of the JetStream buckets and streams: 3 on a cluster of three or more
	// NATS servers, so that they survive the loss of one. Default 1.
	Replicas int `yaml:"replicas"`
	// Lease is how long an instance's claims (subscription leases, session ownership)
	// outlive it. Default 15s.
	Lease time.Duration `yaml:"lease"`
}

// ClusterConfig joins embedded servers.
type ClusterConfig struct {
	Name   string   `yaml:"name"`   // cluster name; default "mcprouter"
	Listen string   `yaml:"listen"` // route listener, host:port
	Routes []string `yaml:"routes"` // nats-route://host:port of the others
	// User and Password are the route credentials, required with listen: every server
	// of the cluster requires them of the others and presents them to its routes.
	User     string `yaml:"user"`
	Password string `yaml:"password"`
	// TLS of the routes: this server's certificate and key, and the CA the other
	// servers' certificates must chain to (set all three, or none).
	TLS TLSConfig `yaml:"tls"`
}

// JetStreamConfig bounds JetStream: every stream and key-value bucket the router
// creates, and the embedded server's stores. Zero values take the defaults.
type JetStreamConfig struct {
	// MaxMemory caps the embedded server's memory store (every bucket and stream the
	// router creates lives there). Default 256 MiB.
	MaxMemory int64 `yaml:"max_memory"`
	// MaxStore caps the embedded server's file store. Default 1 GiB.
	MaxStore int64 `yaml:"max_store"`
	// MaxBytes caps each stream and bucket: a bucket refuses writes beyond it, the
	// event log drops its oldest events. Default 64 MiB.
	MaxBytes int64 `yaml:"max_bytes"`
	// MaxMsgBytes caps one record or event; larger ones are not kept (a larger GET
	// stream event still resumes on its own instance). Default 1 MiB.
	MaxMsgBytes int32 `yaml:"max_msg_bytes"`
	// SessionStorage is where the session records' bucket keeps them: "memory"
	// (default) or "file" (in store_dir). In memory each record costs the process that
	// runs the NATS server about 500 bytes of heap (the message and its subject 250,
	// the subject index 250) for every session of every instance; on file about 250
	// (the index) plus the buffer of the block written last (up to 8 MiB), and each
	// write also goes to the block file (no fsync per record). At 100,000 sessions on
	// eight routers the RSS of the router running the server was the same either way
	// (10.5 KiB per own session in memory, 10.7 on file), so file is for records that
	// must outlive the NATS server's process (a store_dir kept across restarts), not
	// for memory. Leases and the event log stay in memory: small, short-lived, read
	// often.
	SessionStorage string `yaml:"session_storage"`
}

func (j *JetStreamConfig) defaults() {
	if j.MaxMemory == 0 {
		j.MaxMemory = 256 << 20
	}
	if j.MaxStore == 0 {
		j.MaxStore = 1 << 30
	}
	if j.MaxBytes == 0 {
		j.MaxBytes = 64 << 20
	}
	if j.MaxMsgBytes == 0 {
		j.MaxMsgBytes = 1 << 20
	}
}

// TLSConfig names PEM files.
type TLSConfig struct {
	CA   string `yaml:"ca"`
	Cert string `yaml:"cert"`
	Key  string `yaml:"key"`
}

// Bus is a live NATS connection (and the embedded server when there is one).
type Bus struct {
	cfg    Config
	log    *slog.Logger
	NC     *nats.Conn
	JS     jetstream.JetStream // nil without JetStream
	Server *server.Server      // nil with an external cluster
	tmpDir string

	// Connected is false while the connection to NATS is lost.
	Connected     atomic.Bool
	Disconnects   atomic.Uint64
	Reconnects    atomic.Uint64
	AsyncErrors   atomic.Uint64
	onReconnected atomic.Pointer[func()]

	// closing is set by Close: the disconnect that follows is the router's own doing,
	// not an outage worth a warning. closed is closed once the connection is.
	closing atomic.Bool
	closed  chan struct{}
}

// Validate checks the configuration.
func (c *Config) Validate() error {
	if c.URL != "" && (c.Listen != "" || c.Cluster.Listen != "") {
		return errors.New("nats: url (external cluster) and listen/cluster (embedded server) exclude each other")
	}
	for _, a := range []struct{ key, v string }{{"nats.listen", c.Listen}, {"nats.cluster.listen", c.Cluster.Listen}} {
		if a.v != "" {
			if _, _, err := net.SplitHostPort(a.v); err != nil {
				return fmt.Errorf("%s: %q is not host:port", a.key, a.v)
			}
		}
	}
	if c.Prefix != "" && strings.ContainsAny(c.Prefix, ".*> \t") {
		return fmt.Errorf("nats.prefix: %q must be one subject token", c.Prefix)
	}
	if err := c.validateAuth(); err != nil {
		return err
	}
	// defaults would take a negative value for its default: a sign typo must not pass.
	if c.Replicas < 0 {
		return fmt.Errorf("nats.replicas: must not be negative (got %d)", c.Replicas)
	}
	if c.Lease < 0 {
		return fmt.Errorf("nats.lease: must not be negative (got %s)", c.Lease)
	}
	j := c.JetStream
	if j.MaxMemory < 0 || j.MaxStore < 0 || j.MaxBytes < 0 || j.MaxMsgBytes < 0 {
		return errors.New("nats.jetstream: limits must not be negative")
	}
	if j.SessionStorage != "" && j.SessionStorage != "file" && j.SessionStorage != "memory" {
		return fmt.Errorf("nats.jetstream.session_storage: %q: want file or memory", j.SessionStorage)
	}
	return nil
}

// validateAuth refuses listeners without credentials, and credentials that exclude
// each other.
func (c *Config) validateAuth() error {
	if c.Token != "" && (c.User != "" || len(c.NKeys) > 0) {
		return errors.New("nats.token excludes nats.user and nats.nkeys: set one kind of credentials")
	}
	if (c.User == "") != (c.Password == "") {
		return errors.New("nats.user and nats.password go together: set both")
	}
	if c.Listen != "" && c.User == "" && c.Token == "" && len(c.NKeys) == 0 {
		return fmt.Errorf("nats.listen: the embedded NATS server accepts clients on %s only with credentials: set nats.user and nats.password, or nats.token, or nats.nkeys (and nats.tls.cert and nats.tls.key for TLS)", c.Listen)
	}
	if c.Listen != "" && (c.TLS.Cert == "") != (c.TLS.Key == "") {
		return errors.New("nats.tls: cert and key go together: set both")
	}
	cl := c.Cluster
	if cl.Listen != "" && c.Listen == "" {
		return errors.New("nats.cluster.listen needs nats.listen: the embedded server opens its route port only with its client port")
	}
	if cl.Listen != "" && (cl.User == "" || cl.Password == "") {
		return fmt.Errorf("nats.cluster.listen: the embedded NATS server accepts routes on %s only with credentials: set nats.cluster.user and nats.cluster.password (the same on every server of the cluster)", cl.Listen)
	}
	if t := cl.TLS; (t.Cert != "" || t.Key != "" || t.CA != "") && (t.Cert == "" || t.Key == "" || t.CA == "") {
		return errors.New("nats.cluster.tls: set cert, key and ca together (routes verify each other)")
	}
	return nil
}

func (c *Config) defaults() {
	if c.JetStream.SessionStorage == "" {
		c.JetStream.SessionStorage = "memory"
	}
	if c.Prefix == "" {
		c.Prefix = "mcpr"
	}
	if c.Name == "" {
		c.Name = "mcpr-" + randomHex(6)
	}
	if c.Lease <= 0 {
		c.Lease = 15 * time.Second
	}
	if c.Cluster.Name == "" {
		c.Cluster.Name = "mcprouter"
	}
	c.JetStream.defaults()
}

// Start connects to NATS, starting the embedded server first when no URL is given.
func Start(cfg Config, log *slog.Logger) (*Bus, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.defaults()
	if log == nil {
		log = slog.Default()
	}
	b := &Bus{cfg: cfg, log: log, closed: make(chan struct{})}
	opts := []nats.Option{
		nats.Name(cfg.Name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.ReconnectBufSize(8 << 20),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			b.Connected.Store(false)
			if b.closing.Load() {
				return
			}
			b.Disconnects.Add(1)
			log.Warn("NATS connection lost: notifications across instances are paused", "err", err)
		}),
		nats.ClosedHandler(func(*nats.Conn) { close(b.closed) }),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			b.Connected.Store(true)
			b.Reconnects.Add(1)
			log.Info("NATS connection restored", "server", nc.ConnectedUrlRedacted())
			if fn := b.onReconnected.Load(); fn != nil {
				(*fn)()
			}
		}),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			b.AsyncErrors.Add(1)
			log.Warn("NATS error", "err", err)
		}),
	}
	var err error
	if cfg.URL == "" {
		self, serr := b.startServer()
		if serr != nil {
			return nil, serr
		}
		opts = append(opts, nats.InProcessServer(b.Server))
		opts = append(opts, self...)
		b.NC, err = nats.Connect("", opts...)
	} else {
		opts = append(opts, b.authOptions()...)
		b.NC, err = nats.Connect(cfg.URL, opts...)
	}
	if err != nil {
		b.Close()
		return nil, fmt.Errorf("nats: connect: %w", err)
	}
	b.Connected.Store(true)
	if js, err := jetstream.New(b.NC); err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if _, err := js.AccountInfo(ctx); err == nil {
			b.JS = js
		} else {
			log.Warn("NATS without JetStream: subscription leases and session records are off", "err", err)
		}
		cancel()
	}
	return b, nil
}

func (b *Bus) authOptions() []nats.Option {
	var o []nats.Option
	c := b.cfg
	if c.Creds != "" {
		o = append(o, nats.UserCredentials(c.Creds))
	}
	if c.User != "" {
		o = append(o, nats.UserInfo(c.User, c.Password))
	}
	if c.Token != "" {
		o = append(o, nats.Token(c.Token))
	}
	if c.TLS.CA != "" {
		o = append(o, nats.RootCAs(c.TLS.CA))
	}
	if c.TLS.Cert != "" {
		o = append(o, nats.ClientCert(c.TLS.Cert, c.TLS.Key))
	}
	return o
}

// startServer starts the embedded server and returns the options the router's own
// in-process connection needs to pass its authentication.
func (b *Bus) startServer() ([]nats.Option, error) {
	c := b.cfg
	o := &server.Options{
		ServerName:         c.Name,
		DontListen:         c.Listen == "",
		NoSigs:             true,
		NoLog:              true,
		JetStream:          !c.NoJetStream,
		JetStreamMaxMemory: c.JetStream.MaxMemory,
		JetStreamMaxStore:  c.JetStream.MaxStore,
		StoreDir:           c.StoreDir,
		MaxPayload:         8 << 20,
	}
	var self []nats.Option
	if c.Listen != "" {
		host, port, _ := net.SplitHostPort(c.Listen)
		o.Host = host
		o.Port, _ = strconv.Atoi(port)
		if o.Port == 0 {
			o.Port = server.RANDOM_PORT
		}
		var err error
		if self, err = b.clientAuth(o); err != nil {
			return nil, err
		}
	}
	if c.Cluster.Listen != "" {
		if err := b.clusterOptions(o); err != nil {
			return nil, err
		}
	}
	if o.JetStream && o.StoreDir == "" {
		dir, err := os.MkdirTemp("", "mcprouter-nats-")
		if err != nil {
			return nil, err
		}
		b.tmpDir, o.StoreDir = dir, dir
	}
	ns, err := server.NewServer(o)
	if err != nil {
		b.removeTmp()
		return nil, fmt.Errorf("nats: embedded server: %w", err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(15 * time.Second) {
		ns.Shutdown()
		b.removeTmp()
		return nil, errors.New("nats: embedded server did not start within 15s")
	}
	b.Server = ns
	if c.Listen != "" {
		b.log.Info("embedded NATS accepting clients", "url", ns.ClientURL(), "tls", o.TLSConfig != nil)
	}
	return self, nil
}

// clientAuth makes the client listener require the configured credentials (and TLS
// when configured), and returns how the router's own connection authenticates: with
// the token, or as a user of its own with a random password (nkeys users sign with a
// seed the router does not have).
func (b *Bus) clientAuth(o *server.Options) ([]nats.Option, error) {
	c := b.cfg
	if t := c.TLS; t.Cert != "" {
		tc, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: t.Cert, KeyFile: t.Key, CaFile: t.CA, Verify: t.CA != ""})
		if err != nil {
			return nil, fmt.Errorf("nats.tls: %w", err)
		}
		o.TLSConfig, o.TLS, o.TLSVerify, o.TLSTimeout = tc, true, t.CA != "", 2
	}
	if c.Token != "" {
		o.Authorization = c.Token
		return []nats.Option{nats.Token(c.Token)}, nil
	}
	if c.User != "" {
		o.Users = append(o.Users, &server.User{Username: c.User, Password: c.Password})
	}
	for _, k := range c.NKeys {
		o.Nkeys = append(o.Nkeys, &server.NkeyUser{Nkey: k})
	}
	self, pass := "mcprouter-"+c.Name, randomHex(24)
	o.Users = append(o.Users, &server.User{Username: self, Password: pass})
	return []nats.Option{nats.UserInfo(self, pass)}, nil
}

// clusterOptions sets up the route listener: credentials required of and presented to
// the other servers, and TLS.
func (b *Bus) clusterOptions(o *server.Options) error {
	c := b.cfg.Cluster
	host, port, _ := net.SplitHostPort(c.Listen)
	o.Cluster.Name = c.Name
	o.Cluster.Host = host
	o.Cluster.Port, _ = strconv.Atoi(port)
	if o.Cluster.Port == 0 {
		o.Cluster.Port = server.RANDOM_PORT
	}
	o.Cluster.Username, o.Cluster.Password = c.User, c.Password
	for _, r := range c.Routes {
		u, err := url.Parse(r)
		if err != nil {
			return fmt.Errorf("nats.cluster.routes: %q: %w", r, err)
		}
		if u.User == nil {
			u.User = url.UserPassword(c.User, c.Password)
		}
		o.Routes = append(o.Routes, u)
	}
	if t := c.TLS; t.Cert != "" {
		tc, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: t.Cert, KeyFile: t.Key, CaFile: t.CA, Verify: true})
		if err != nil {
			return fmt.Errorf("nats.cluster.tls: %w", err)
		}
		tc.RootCAs = tc.ClientCAs // routes are clients of each other too
		o.Cluster.TLSConfig, o.Cluster.TLSTimeout = tc, 2
	}
	return nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func (b *Bus) removeTmp() {
	if b.tmpDir != "" {
		os.RemoveAll(b.tmpDir)
		b.tmpDir = ""
	}
}

// ClientURL is the URL other processes use to reach the embedded server ("" when it
// opened no port or NATS is external).
func (b *Bus) ClientURL() string {
	if b.Server == nil || b.cfg.Listen == "" {
		return ""
	}
	return b.Server.ClientURL()
}

// Shared reports whether another process can reach the bus: an external NATS (url), or
// an embedded server that accepts clients (listen) or joins a cluster. The buckets and
// streams kept for other instances (session records, the event log) are in memory
// storage: on a private embedded server they end with this process, unread, and
// writing one record per session cost each idle session about 400 bytes of the
// server's memory (message, subject, index) and a JetStream write for nothing.
func (b *Bus) Shared() bool {
	return b.Server == nil || b.cfg.Listen != "" || b.cfg.Cluster.Listen != ""
}

// Name is this instance's name.
func (b *Bus) Name() string { return b.cfg.Name }

// Prefix is the cluster's subject prefix.
func (b *Bus) Prefix() string { return b.cfg.Prefix }

// Lease is how long an instance's claims outlive it.
func (b *Bus) Lease() time.Duration { return b.cfg.Lease }

// OnReconnected sets a function run after every reconnection (re-assert claims).
func (b *Bus) OnReconnected(fn func()) { b.onReconnected.Store(&fn) }

// Subject joins the prefix and tokens into a subject.
func (b *Bus) Subject(tokens ...string) string {
	return b.cfg.Prefix + "." + strings.Join(tokens, ".")
}

// KeyValue opens (creating if needed) the bucket P_name whose entries expire after ttl
// unless rewritten, within nats.jetstream.max_bytes (writes beyond are refused) and
// max_msg_bytes.
func (b *Bus) KeyValue(ctx context.Context, name string, ttl time.Duration) (jetstream.KeyValue, error) {
	return b.keyValue(ctx, name, ttl, 0, jetstream.MemoryStorage)
}

// keyValue is KeyValue on the given storage; markers > 0 also lets the bucket's messages
// carry TTLs of their own (a purge marker that goes after markers: jetstream.PurgeTTL),
// and keeps the markers of expired entries that long (NATS 2.11 and later).
func (b *Bus) keyValue(ctx context.Context, name string, ttl, markers time.Duration, storage jetstream.StorageType) (jetstream.KeyValue, error) {
	if b.JS == nil {
		return nil, errors.New("nats: JetStream not available")
	}
	return b.JS.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket: b.cfg.Prefix + "_" + name, TTL: ttl, History: 1, Storage: storage,
		Replicas: b.replicas(), MaxBytes: b.cfg.JetStream.MaxBytes, MaxValueSize: b.cfg.JetStream.MaxMsgBytes,
		LimitMarkerTTL: markers,
	})
}

func (b *Bus) replicas() int {
	if b.cfg.Replicas < 1 {
		return 1
	}
	return b.cfg.Replicas
}

// Close drains the connection and stops the embedded server.
func (b *Bus) Close() {
	if b.NC != nil {
		b.closing.Store(true)
		if b.NC.Drain() == nil {
			// Drain ends in Close, which runs the closed handler; its own timeout
			// bounds it, this one bounds a connection that never finishes.
			t := time.NewTimer(5 * time.Second)
			select {
			case <-b.closed:
			case <-t.C:
			}
			t.Stop()
		}
		b.NC.Close()
	}
	if b.Server != nil {
		b.Server.Shutdown()
		b.Server.WaitForShutdown()
	}
	b.removeTmp()
}
