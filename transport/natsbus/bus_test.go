package natsbus

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/mcprouter/mcprouter/internal/testwait"
)

// waitLimit bounds every wait on an event in these tests; it is generous because the
// tests assert what happens, not how fast.
const waitLimit = 20 * time.Second

// quietLog keeps the buses' warnings (expected ones: no JetStream, connection lost) out
// of the test output.
var quietLog = slog.New(slog.DiscardHandler)

// withUser gives a configuration the credentials a listening embedded server requires
// and its clients present.
func withUser(c Config) Config {
	c.User, c.Password = "router", "secret"
	return c
}

// startBus starts a bus for one test and closes it when the test ends.
func startBus(t *testing.T, cfg Config) *Bus {
	t.Helper()
	b, err := Start(cfg, quietLog)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b
}

// twoStores starts two instances on one NATS, the second joining the first's server,
// and opens each one's session store: what one writes, the other must read.
func twoStores(t *testing.T) (sa, sb *SessionStore) {
	t.Helper()
	a := startBus(t, withUser(Config{Listen: "127.0.0.1:0"}))
	b := startBus(t, withUser(Config{URL: a.ClientURL()}))
	var err error
	if sa, err = a.Sessions(time.Hour); err != nil {
		t.Fatal(err)
	}
	if sb, err = b.Sessions(time.Hour); err != nil {
		t.Fatal(err)
	}
	return sa, sb
}

// busStore starts a bus and opens its session store, for a test that closes the bus
// itself (NATS gone) and then uses the store.
func busStore(t *testing.T) (*Bus, *SessionStore) {
	t.Helper()
	b, err := Start(Config{}, quietLog)
	if err != nil {
		t.Fatal(err)
	}
	s, err := b.Sessions(time.Hour)
	if err != nil {
		b.Close()
		t.Fatal(err)
	}
	return b, s
}

// eventually polls cond until it holds, failing the test after waitLimit.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testwait.For(t, what, waitLimit, cond)
}

// receive reads n messages from ch, failing the test if they do not come.
func receive(t *testing.T, ch <-chan *nats.Msg, n int) []string {
	t.Helper()
	timer := time.NewTimer(waitLimit)
	defer timer.Stop()
	var got []string
	for len(got) < n {
		select {
		case m := <-ch:
			got = append(got, string(m.Data))
		case <-timer.C:
			t.Fatalf("received %d of %d messages: %q", len(got), n, got)
		}
	}
	return got
}

// validateCase is a configuration and what Validate must say of it.
type validateCase struct {
	name string
	cfg  Config
	want string // a word of the error, "" for a valid configuration
}

// checkValidate runs Validate on each case, as a subtest.
func checkValidate(t *testing.T, cases []validateCase) {
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("valid configuration refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Validate = %v, want an error naming %q", err, tc.want)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	checkValidate(t, []validateCase{
		{"zero value", Config{}, ""},
		{"embedded with ports", Config{Listen: "127.0.0.1:0", User: "u", Password: "p", Cluster: ClusterConfig{Listen: "127.0.0.1:0", User: "r", Password: "p"}}, ""},
		{"external", Config{URL: "nats://127.0.0.1:4222", Prefix: "team_a"}, ""},
		{"url and listen", Config{URL: "nats://127.0.0.1:4222", Listen: "127.0.0.1:0"}, "exclude"},
		{"url and cluster", Config{URL: "nats://127.0.0.1:4222", Cluster: ClusterConfig{Listen: "127.0.0.1:0"}}, "exclude"},
		{"listen without port", Config{Listen: "127.0.0.1"}, "nats.listen"},
		{"cluster listen without port", Config{Cluster: ClusterConfig{Listen: "nowhere"}}, "nats.cluster.listen"},
		{"prefix with a dot", Config{Prefix: "a.b"}, "nats.prefix"},
		{"prefix with a wildcard", Config{Prefix: "a*"}, "nats.prefix"},
		{"prefix with a space", Config{Prefix: "a b"}, "nats.prefix"},
		{"records on file", Config{JetStream: JetStreamConfig{SessionStorage: "file"}}, ""},
		{"records in memory", Config{JetStream: JetStreamConfig{SessionStorage: "memory"}}, ""},
		{"records elsewhere", Config{JetStream: JetStreamConfig{SessionStorage: "disk"}}, "session_storage"},
	})
}

// Start refuses what Validate refuses, and reports a server it cannot reach or build.
func TestStartErrors(t *testing.T) {
	if _, err := Start(Config{Prefix: "a.b"}, quietLog); err == nil {
		t.Fatal("Start accepted an invalid prefix")
	}
	// A loopback port with nothing behind it.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "nats://" + l.Addr().String()
	l.Close()
	if b, err := Start(Config{URL: dead}, quietLog); err == nil || !strings.Contains(err.Error(), "connect") {
		if b != nil {
			b.Close()
		}
		t.Fatalf("Start against a closed port: %v, want a connect error", err)
	}
	cfg := withUser(Config{Listen: "127.0.0.1:0", Cluster: ClusterConfig{Listen: "127.0.0.1:0", User: "r", Password: "p", Routes: []string{"nats-route://[::1"}}, NoJetStream: true})
	if _, err := Start(cfg, nil); err == nil || !strings.Contains(err.Error(), "nats.cluster.routes") {
		t.Fatalf("Start with a malformed route: %v", err)
	}
}

// The zero configuration runs an embedded server with JetStream, no port, and the
// documented defaults.
func TestStartEmbeddedDefaults(t *testing.T) {
	b := startBus(t, Config{})
	if b.Server == nil || b.JS == nil || !b.Connected.Load() {
		t.Fatalf("server %v, JetStream %v, connected %v", b.Server, b.JS, b.Connected.Load())
	}
	if b.Prefix() != "mcpr" || b.Lease() != 15*time.Second || !strings.HasPrefix(b.Name(), "mcpr-") {
		t.Fatalf("prefix %q lease %v name %q", b.Prefix(), b.Lease(), b.Name())
	}
	if u := b.ClientURL(); u != "" {
		t.Fatalf("ClientURL %q without a listen address", u)
	}
	if got := b.Subject("res", "k1"); got != "mcpr.res.k1" {
		t.Fatalf("Subject = %q", got)
	}
	if b.replicas() != 1 {
		t.Fatalf("replicas %d by default", b.replicas())
	}
	other := startBus(t, Config{})
	if other.Name() == b.Name() {
		t.Fatalf("two instances share the random name %q", b.Name())
	}
}

// Every subscriber of a subject gets every message, in order; a queue group shares
// them out, one member each.
func TestPublishSubscribeFanOut(t *testing.T) {
	b := startBus(t, Config{Prefix: "fan", NoJetStream: true})
	subject := b.Subject("changed", "backend1")
	if subject != "fan.changed.backend1" {
		t.Fatalf("subject %q", subject)
	}
	const subscribers, messages = 3, 20
	chans := make([]chan *nats.Msg, subscribers)
	for i := range chans {
		chans[i] = make(chan *nats.Msg, messages)
		if _, err := b.NC.ChanSubscribe(subject, chans[i]); err != nil {
			t.Fatal(err)
		}
	}
	queued := make(chan *nats.Msg, messages)
	for range 2 {
		if _, err := b.NC.ChanQueueSubscribe(subject, "workers", queued); err != nil {
			t.Fatal(err)
		}
	}
	// The server has the subscriptions once a round trip is done.
	if err := b.NC.Flush(); err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := range messages {
		want = append(want, fmt.Sprint("m", i))
		if err := b.NC.Publish(subject, []byte(want[i])); err != nil {
			t.Fatal(err)
		}
	}
	for i, ch := range chans {
		if got := receive(t, ch, messages); strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("subscriber %d got %q", i, got)
		}
	}
	got := receive(t, queued, messages)
	// One more round trip: a duplicate delivery to the group would be queued by now.
	if err := b.NC.Flush(); err != nil {
		t.Fatal(err)
	}
	if len(queued) != 0 || len(got) != messages {
		t.Fatalf("queue group got %d messages and %d more, want %d once each", len(got), len(queued), messages)
	}
}

// An embedded server that listens is a cluster for other instances: a bus given its
// URL sees what the first publishes, and the reverse.
func TestTwoInstancesOverLoopback(t *testing.T) {
	a := startBus(t, withUser(Config{Listen: "127.0.0.1:0", Name: "a"}))
	url := a.ClientURL()
	if !strings.HasPrefix(url, "nats://127.0.0.1:") {
		t.Fatalf("ClientURL %q", url)
	}
	b := startBus(t, withUser(Config{URL: url, Name: "b"}))
	if b.Server != nil || b.ClientURL() != "" {
		t.Fatalf("a bus on an external URL runs a server (%v) or advertises %q", b.Server, b.ClientURL())
	}
	if b.JS == nil {
		t.Fatal("JetStream of the embedded server not found over the network")
	}
	for _, dir := range []struct{ from, to *Bus }{{a, b}, {b, a}} {
		subject := dir.to.Subject("sess", dir.to.Name())
		ch := make(chan *nats.Msg, 1)
		sub, err := dir.to.NC.ChanSubscribe(subject, ch)
		if err != nil {
			t.Fatal(err)
		}
		if err := dir.to.NC.Flush(); err != nil {
			t.Fatal(err)
		}
		if err := dir.from.NC.Publish(subject, []byte("to "+dir.to.Name())); err != nil {
			t.Fatal(err)
		}
		if got := receive(t, ch, 1); got[0] != "to "+dir.to.Name() {
			t.Fatalf("got %q", got)
		}
		sub.Unsubscribe()
	}
}

// KeyValue creates the bucket P_name once and opens it after; its entries are shared
// by every instance on the same NATS.
func TestKeyValue(t *testing.T) {
	a := startBus(t, withUser(Config{Listen: "127.0.0.1:0", Prefix: "kvt"}))
	b := startBus(t, withUser(Config{URL: a.ClientURL(), Prefix: "kvt"}))
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	kv, err := a.KeyValue(ctx, "leases", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if kv.Bucket() != "kvt_leases" {
		t.Fatalf("bucket %q, want kvt_leases", kv.Bucket())
	}
	if _, err := kv.Put(ctx, "s.k1.owner", []byte("a")); err != nil {
		t.Fatal(err)
	}
	kv2, err := b.KeyValue(ctx, "leases", time.Minute) // same configuration: opens it
	if err != nil {
		t.Fatal(err)
	}
	e, err := kv2.Get(ctx, "s.k1.owner")
	if err != nil || string(e.Value()) != "a" {
		t.Fatalf("the other instance reads %v, %v", e, err)
	}
}

// Without JetStream the bus still carries messages, and everything that needs
// JetStream says so instead of failing later.
func TestNoJetStream(t *testing.T) {
	b := startBus(t, Config{NoJetStream: true})
	if b.JS != nil {
		t.Fatal("JetStream found on a server started without it")
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if _, err := b.KeyValue(ctx, "x", time.Minute); err == nil || !strings.Contains(err.Error(), "JetStream") {
		t.Fatalf("KeyValue: %v", err)
	}
	if _, err := b.Sessions(time.Minute); err == nil {
		t.Fatal("Sessions without JetStream")
	}
	if _, err := b.Events(10, time.Minute); err == nil {
		t.Fatal("Events without JetStream")
	}
}

// Close delivers what was published before it, stops the embedded server and removes
// the temporary JetStream directory; a directory the configuration named is kept.
func TestClose(t *testing.T) {
	b, err := Start(Config{}, quietLog)
	if err != nil {
		t.Fatal(err)
	}
	tmp := b.tmpDir
	if _, err := os.Stat(tmp); err != nil {
		t.Fatalf("temporary store directory: %v", err)
	}
	ch := make(chan *nats.Msg, 10)
	if _, err := b.NC.ChanSubscribe(b.Subject("x"), ch); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		b.NC.Publish(b.Subject("x"), []byte{byte('0' + i)})
	}
	srv := b.Server
	b.Close()
	if len(ch) != 10 {
		t.Fatalf("%d of 10 messages published before Close were delivered", len(ch))
	}
	if !b.NC.IsClosed() || srv.Running() {
		t.Fatalf("after Close: connection closed %v, server running %v", b.NC.IsClosed(), srv.Running())
	}
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Fatalf("temporary store directory still there: %v", err)
	}
	if err := b.NC.Publish(b.Subject("x"), nil); err == nil {
		t.Fatal("publish after Close succeeded")
	}

	dir := t.TempDir()
	kept, err := Start(Config{StoreDir: dir}, quietLog)
	if err != nil {
		t.Fatal(err)
	}
	if kept.tmpDir != "" {
		t.Fatalf("a configured store directory was taken as temporary")
	}
	kept.Close()
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("configured store directory removed: %v", err)
	}
}

// A lost connection is counted and reported; when NATS comes back the bus reconnects
// on its own and runs the OnReconnected hook.
func TestReconnect(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	opts := &server.Options{Host: "127.0.0.1", Port: port, NoLog: true, NoSigs: true}
	startServer := func() *server.Server {
		t.Helper()
		s, err := server.NewServer(opts)
		if err != nil {
			t.Fatal(err)
		}
		go s.Start()
		if !s.ReadyForConnections(waitLimit) {
			t.Fatal("NATS server not ready")
		}
		return s
	}
	s := startServer()
	b := startBus(t, Config{URL: fmt.Sprintf("nats://127.0.0.1:%d", port)})
	if b.JS != nil {
		t.Fatal("JetStream found on a server without it")
	}
	reconnected := make(chan struct{}, 1)
	b.OnReconnected(func() { reconnected <- struct{}{} })

	s.Shutdown()
	s.WaitForShutdown()
	eventually(t, "the loss to be noticed", func() bool { return !b.Connected.Load() && b.Disconnects.Load() >= 1 })

	s = startServer()
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	select {
	case <-reconnected:
	case <-time.After(waitLimit):
		t.Fatal("no reconnection")
	}
	if !b.Connected.Load() || b.Reconnects.Load() != 1 {
		t.Fatalf("connected %v after %d reconnections", b.Connected.Load(), b.Reconnects.Load())
	}
	// And the connection works again.
	ch := make(chan *nats.Msg, 1)
	if _, err := b.NC.ChanSubscribe(b.Subject("back"), ch); err != nil {
		t.Fatal(err)
	}
	if err := b.NC.Flush(); err != nil {
		t.Fatal(err)
	}
	b.NC.Publish(b.Subject("back"), []byte("again"))
	if got := receive(t, ch, 1); got[0] != "again" {
		t.Fatalf("got %q", got)
	}
}
