package fleet

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/internal/testbin"
	"github.com/mcprouter/mcprouter/internal/testwait"
	"github.com/mcprouter/mcprouter/router/modern"
	"github.com/mcprouter/mcprouter/transport/upstream"
)

func TestMain(m *testing.M) { testbin.Main(m) }

// everythingServer is the Go SDK's conformance server: with stateless it speaks
// 2026-07-28 (and, dual-era, still answers initialize), without it only the 2025
// revisions, behind one Mcp-Session-Id per client.
const everythingServer = "github.com/modelcontextprotocol/go-sdk/conformance/everything-server"

// startEverything starts the conformance server on addr and waits until it accepts
// connections. A port just released by a killed server may take a moment to bind
// again: the start is retried, a bounded number of times.
func startEverything(t *testing.T, addr string, stateless bool) *testbin.Proc {
	t.Helper()
	bin := testbin.BuildFixture(t, everythingServer)
	mode := "-stateless=false"
	if stateless {
		mode = "-stateless=true"
	}
	for attempt := 0; attempt < 50; attempt++ {
		p, err := testbin.Spawn(testbin.Spec{Bin: bin, Args: []string{"-http", addr, mode}})
		if err != nil {
			t.Fatal(err)
		}
		if waitListening(addr, p, 20*time.Second) {
			t.Cleanup(p.Kill)
			return p
		}
		p.Kill()
	}
	t.Fatalf("conformance server never listened on %s", addr)
	return nil
}

// waitListening waits until addr accepts connections or p exits (its port was still
// taken): the server logs its address before it listens, so its log is no ready event.
func waitListening(addr string, p *testbin.Proc, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond); err == nil {
			c.Close()
			return true
		}
		select {
		case <-p.Exited():
			return false
		case <-time.After(20 * time.Millisecond):
		}
	}
	return false
}

// startModernOnly starts mcpbackend serving 2026-07-28 alone on addr (retried while the
// port is still taken by a server just killed).
func startModernOnly(t *testing.T, addr string) *testbin.Proc {
	t.Helper()
	bin := testbin.Build(t, testbin.Backend)
	for attempt := 0; attempt < 50; attempt++ {
		p, err := testbin.Spawn(testbin.Spec{Bin: bin, Args: []string{"--listen", addr, "--eras", "modern", "--tick", "0"},
			Ready: []string{"mcpbackend listening"}})
		if err == nil {
			t.Cleanup(p.Kill)
			return p
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("mcpbackend never listened on %s", addr)
	return nil
}

// httpFleet is a fleet with one backend ("ev") on the Streamable HTTP endpoint at addr.
func httpFleet(t *testing.T, addr string, era Era, health time.Duration) *Fleet {
	url := "http://" + addr + "/mcp"
	f := New(Config{HealthInterval: health, HealthTimeout: time.Second, Backends: []BackendConfig{{
		Name: "ev", Timeout: 10 * time.Second, Era: era,
		Dialers: []Dialer{{Addr: url, Dial: func(ctx context.Context, sink upstream.Sink) (upstream.Conn, error) {
			return upstream.DialHTTP(ctx, url, upstream.HTTPOptions{Name: "ev"}, sink)
		}}},
	}}})
	t.Cleanup(f.Close)
	return f
}

// liveEra is the era of in's live shared connection (eraUnknown while it has none).
func liveEra(in *instance) uint32 {
	c := in.conn.Load()
	if c == nil || c.dead() {
		return eraUnknown
	}
	if c.modern {
		return eraModern
	}
	return eraLegacy
}

// callTools lists the tools on in's shared connection, as the catalog does.
func callTools(t *testing.T, f *Fleet, in *instance, want string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := f.table.call(ctx, in.conn.Load(), "tools/list", nil)
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	if !strings.Contains(string(res), `"name":"`+want+`"`) {
		t.Fatalf("tools/list lacks %s: %s", want, res)
	}
}

func TestEraDiscovered(t *testing.T) {
	testbin.Long(t, "starts the Go SDK's conformance server")
	const modernOnly, dualEra, legacyOnly = 0, 1, 2
	cases := []struct {
		name    string
		server  int
		pin     Era
		want    uint32
		version string
	}{
		{"auto finds a 2026-07-28 server", modernOnly, EraAuto, eraModern, modern.Version},
		{"auto keeps a session with a dual-era server", dualEra, EraAuto, eraLegacy, "2025-11-25"},
		{"auto falls back to initialize", legacyOnly, EraAuto, eraLegacy, "2025-11-25"},
		{"pinned 2025 initializes a dual-era server", dualEra, Era2025, eraLegacy, "2025-11-25"},
		{"pinned 2026 uses a dual-era server statelessly", dualEra, Era2026, eraModern, modern.Version},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			addr := testbin.FreeAddr(t)
			tool := "test_simple_text"
			if tc.server == modernOnly {
				startModernOnly(t, addr)
				tool = "echo"
			} else {
				startEverything(t, addr, tc.server == dualEra)
			}
			f := httpFleet(t, addr, tc.pin, time.Second)
			f.Start(20 * time.Second)
			in := f.set.all()[0].instances[0]
			if got := in.era.Load(); got != tc.want {
				t.Fatalf("era %d, want %d", got, tc.want)
			}
			c := in.conn.Load()
			if c.version != tc.version {
				t.Fatalf("version %q, want %q", c.version, tc.version)
			}
			if _, ok := c.conn.(*upstream.StatelessConn); ok != (tc.want == eraModern) {
				t.Fatalf("connection %T for era %d", c.conn, tc.want)
			}
			callTools(t, f, in, tool)
			// The catalog was built from the backend's lists in either era.
			if _, ok := f.catalog.cur.Load().tools[tool]; !ok {
				t.Fatalf("the catalog lacks %s", tool)
			}
		})
	}
}

func TestEraPinned2026RefusesALegacyBackend(t *testing.T) {
	testbin.Long(t, "starts the Go SDK's conformance server")
	addr := testbin.FreeAddr(t)
	startEverything(t, addr, false)
	f := httpFleet(t, addr, Era2026, time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := f.conns.open(ctx, f.set.all()[0].instances[0], nil)
	if err == nil || !strings.Contains(err.Error(), "pinned to 2026-07-28") || !strings.Contains(err.Error(), "does not offer") {
		t.Fatalf("open: %v, want the pin named and the backend's versions", err)
	}
}

// TestEraRecheckedAfterRestart replaces the backend behind one address by one of the
// other era, both ways: a 2025 session whose health checks failed and then passed is
// probed with server/discover, and the 2026 health check (server/discover) sees the
// revision gone.
func TestEraRecheckedAfterRestart(t *testing.T) {
	testbin.Long(t, "starts and restarts the Go SDK's conformance server")
	addr := testbin.FreeAddr(t)
	p := startEverything(t, addr, false)
	f := httpFleet(t, addr, EraAuto, 100*time.Millisecond)
	f.Start(20 * time.Second)
	in := f.set.all()[0].instances[0]
	if liveEra(in) != eraLegacy {
		t.Fatalf("era %d before the restart, want legacy", liveEra(in))
	}

	// The restart must be seen: health checks fail while the backend is away (a
	// restart between two checks that loses no session goes unnoticed, by design).
	p.Kill()
	testwait.For(t, "ejected while down", 30*time.Second, func() bool { return !in.healthy.Load() })
	p = startModernOnly(t, addr)
	testwait.For(t, "2026-07-28 after the restart", 30*time.Second, func() bool { return liveEra(in) == eraModern })
	callTools(t, f, in, "echo")

	p.Kill()
	startEverything(t, addr, false)
	testwait.For(t, "2025 again after the second restart", 30*time.Second, func() bool { return liveEra(in) == eraLegacy })
	callTools(t, f, in, "test_simple_text")
}
