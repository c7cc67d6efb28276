package fleet

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/internal/testwait"
	"github.com/mcprouter/mcprouter/router"
	"github.com/mcprouter/mcprouter/transport/upstream"
)

// restartableBackend is a Go SDK server (2025 sessions) on a loopback address that
// stays the same across restarts, whose subscriptions are told on subscribed.
type restartableBackend struct {
	addr       string
	hs         *http.Server
	subscribed chan string
}

// start serves a fresh server (no sessions) on rb.addr ("": a free port).
func (rb *restartableBackend) start(t *testing.T) {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "board", Version: "1"}, &mcp.ServerOptions{
		SubscribeHandler: func(_ context.Context, r *mcp.SubscribeRequest) error {
			rb.subscribed <- r.Params.URI
			return nil
		},
		UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
	})
	srv.AddResource(&mcp.Resource{URI: "memo://board", Name: "board"}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: "memo://board", Text: "-"}}}, nil
	})
	addr := rb.addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	rb.addr = l.Addr().String()
	rb.hs = &http.Server{Handler: mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)}
	go rb.hs.Serve(l)
}

// TestListenPrincipalRevived: a principal's upstream session with a per-client 2025
// backend dies outright while a listen stream listens on it (the backend restarts and
// forgets the session, which is not renewed): the router opens a new session and
// subscribes it again, without waiting for a request of the principal's.
func TestListenPrincipalRevived(t *testing.T) {
	rb := &restartableBackend{subscribed: make(chan string, 4)}
	rb.start(t)
	t.Cleanup(func() { rb.hs.Close() })
	f, b, l := listeningPrincipal(t, rb, 10*time.Second, nil)
	first := f.sessions.principalConnOf(t, principalID(l.sess), b)

	rb.hs.Close() // the backend goes, and comes back without the session
	rb.start(t)
	if uri := testwait.Recv(t, "the subscription on a new session", 30*time.Second, rb.subscribed); uri != "memo://board" {
		t.Fatalf("subscribed again to %q", uri)
	}
	testwait.For(t, "the principal's new upstream session in place", 10*time.Second, func() bool {
		p := &f.sessions.principals
		p.mu.Lock()
		ps := p.m[principalID(l.sess)]
		p.mu.Unlock()
		c := ps.st.conn(b.instances[0])
		return c != nil && c != first && !c.dead()
	})
	if !first.dead() {
		t.Fatal("the first upstream session is still alive")
	}
	f.sessions.unlisten(l)
}

// TestListenPrincipalLost: when the principal's upstream session cannot be replaced
// (the backend comes back without MCP), its listen streams on that backend end with
// codec.CodeBackendUnavailable, so that their clients know they went quiet.
func TestListenPrincipalLost(t *testing.T) {
	tries, lo, hi := relistenTries, relistenMin, relistenMax
	relistenTries, relistenMin, relistenMax = 2, 10*time.Millisecond, 20*time.Millisecond
	t.Cleanup(func() { relistenTries, relistenMin, relistenMax = tries, lo, hi })

	rb := &restartableBackend{subscribed: make(chan string, 4)}
	rb.start(t)
	type ended struct {
		ls   []*clientListener
		code int
	}
	endedCh := make(chan ended, 1)
	f, _, l := listeningPrincipal(t, rb, 2*time.Second, func(f *Fleet) {
		f.sessions.endListeners = func(ls []*clientListener, code int, _ string) { endedCh <- ended{ls, code} }
	})

	// The backend is replaced by a server that knows no MCP: the session is lost and
	// no new one can be opened.
	rb.hs.Close()
	lis, err := net.Listen("tcp", rb.addr)
	if err != nil {
		t.Fatal(err)
	}
	gone := &http.Server{Handler: http.NotFoundHandler()}
	go gone.Serve(lis)
	t.Cleanup(func() { gone.Close() })
	got := testwait.Recv(t, "the listen streams ended", 30*time.Second, endedCh)
	if len(got.ls) != 1 || got.ls[0] != l || got.code != codec.CodeBackendUnavailable {
		t.Fatalf("ended %d listeners (first is ours: %t) with code %d, want ours with %d", len(got.ls), len(got.ls) > 0 && got.ls[0] == l, got.code, codec.CodeBackendUnavailable)
	}
	f.sessions.unlisten(l)
}

// listeningPrincipal starts a fleet with rb as a per-client 2025 backend (timeout: its
// requests' timeout; before, if set, runs before Start) and a principal's listen stream
// on memo://board, once the backend has seen the subscription.
func listeningPrincipal(t *testing.T, rb *restartableBackend, timeout time.Duration, before func(*Fleet)) (*Fleet, *backend, *clientListener) {
	t.Helper()
	url := "http://" + rb.addr + "/mcp"
	f := New(Config{Logger: slog.New(slog.DiscardHandler), Backends: []BackendConfig{{
		Name: "board", Timeout: timeout, Era: Era2025, PerClient: true,
		Dialers: []Dialer{{Addr: url, Dial: func(ctx context.Context, sink upstream.Sink) (upstream.Conn, error) {
			// NoRenew: a backend that lost the session kills the connection.
			return upstream.DialHTTP(ctx, url, upstream.HTTPOptions{Name: "board", NoRenew: true}, sink)
		}}},
	}}})
	if before != nil {
		before(f)
	}
	f.Start(10 * time.Second)
	t.Cleanup(f.Close)
	b := f.set.all()[0]
	testwait.For(t, "the backend's capabilities known", 10*time.Second, func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.caps != nil
	})
	l := &clientListener{sess: new(router.Session)}
	if err := f.listening.listenPrincipal(l, b, "memo://board"); err != nil {
		t.Fatal(err)
	}
	if uri := testwait.Recv(t, "the subscription", 10*time.Second, rb.subscribed); uri != "memo://board" {
		t.Fatalf("subscribed to %q", uri)
	}
	return f, b, l
}
