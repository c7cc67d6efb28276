package fleettest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/internal/ctxtime"
	"github.com/mcprouter/mcprouter/internal/testbin"
	"github.com/mcprouter/mcprouter/internal/testwait"
)

// The limits that keep one client from exhausting the router's backend side
// (router/fleet): pending server-to-client requests, subscriptions per session, and
// the cap on per-client upstream sessions (stdio children).

// startLimited starts a router with the given backends and limits sections (YAML, each
// line indented as under its key) and waits until backend name has instances healthy.
func startLimited(t *testing.T, backends, limits, name string, instances int) *fleet {
	t.Helper()
	f := &fleet{t: t, dir: t.TempDir()}
	cfg := "listen: 127.0.0.1:0\nadmin:\n  listen: 127.0.0.1:0\nshutdown_grace: 5s\nbackends:\n" + backends + "limits:\n" + limits
	f.router = startRouter(t, f.dir, cfg)
	ok := testwait.Poll(wait, func() bool {
		return f.metric("mcprouter_backend_healthy_instances", `backend="`+name+`"`) == float64(instances)
	})
	if !ok {
		t.Fatalf("backend %s is not ready within %v", name, wait)
	}
	return f
}

// httpBackend is the backends section for one Streamable HTTP backend named name.
func httpBackend(name string, p *proc) string {
	return fmt.Sprintf("  - name: %s\n    url: http://%s/mcp\n    timeout: %s\n", name, p.Addr(), backendTimeout)
}

// toolResult reads the response to a tools/call among a raw session's messages: its
// text and isError.
func toolResult(msgs []map[string]json.RawMessage) (text string, isError bool, err error) {
	for _, m := range msgs {
		if _, req := m["method"]; req {
			continue // a request or notification that came before the response
		}
		if e, ok := m["error"]; ok {
			return "", false, fmt.Errorf("JSON-RPC error %s", e)
		}
		var res struct {
			Content []struct{ Text string } `json:"content"`
			IsError bool                    `json:"isError"`
		}
		if err := json.Unmarshal(m["result"], &res); err != nil {
			return "", false, err
		}
		for _, c := range res.Content {
			text += c.Text
		}
		return text, res.IsError, nil
	}
	return "", false, fmt.Errorf("no response among %d messages", len(msgs))
}

// rpcErrorOf returns the code and message of the JSON-RPC error among msgs.
func rpcErrorOf(msgs []map[string]json.RawMessage) (code int, message string, ok bool) {
	for _, m := range msgs {
		if raw, has := m["error"]; has {
			var e struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			}
			json.Unmarshal(raw, &e)
			return e.Code, e.Message, true
		}
	}
	return 0, "", false
}

func sampleCall(id int, prompt string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"%s__sample","arguments":{"prompt":%q}}}`, id, bigName, prompt)
}

// TestServerRequestLimits: a client that declares sampling and never answers holds
// pending requests from the backend. Beyond limits.max_pending_server_requests the
// backend is refused at once; the others get an error at
// limits.server_request_timeout, long before the backend's own 60s: every call ends
// with the backend's tool error saying why.
func TestServerRequestLimits(t *testing.T) {
	big := startBackend(t, "127.0.0.1:0", "--name", bigName)
	f := startLimited(t, httpBackend(bigName, big), "  max_pending_server_requests: 2\n  server_request_timeout: 3s\n", bigName, 1)
	rs := newRawSessionWith(t, f, `{"sampling":{}}`)
	const calls = 3
	texts := make([]string, calls)
	var wg sync.WaitGroup
	for i := range texts {
		wg.Go(func() {
			msgs, err := rs.post(sampleCall(10+i, fmt.Sprintf("unanswered %d", i)))
			if err == nil {
				var isError bool
				texts[i], isError, err = toolResult(msgs)
				if err == nil && !isError {
					err = fmt.Errorf("not an error: %q", texts[i])
				}
			}
			if err != nil {
				t.Errorf("call %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	refused, expired := 0, 0
	for _, text := range texts {
		switch {
		case strings.Contains(text, "already has 2 requests from backends waiting"):
			refused++
		case strings.Contains(text, "did not answer sampling/createMessage within 3s"):
			expired++
		default:
			t.Errorf("unexpected tool error %q", text)
		}
	}
	if refused != 1 || expired != 2 {
		t.Errorf("%d sampling requests refused at the cap and %d expired, want 1 and 2: %q", refused, expired, texts)
	}
	// Nothing stays pending: the session samples again, and is refused only by time.
	msgs, err := rs.post(sampleCall(20, "again"))
	if text, _, err2 := toolResult(msgs); err != nil || err2 != nil || !strings.Contains(text, "did not answer") {
		t.Errorf("after the limits: %v %v %q", err, err2, text)
	}
	if n := f.metric("mcprouter_server_requests_expired_total"); n != 3 {
		t.Errorf("mcprouter_server_requests_expired_total = %v, want 3", n)
	}
}

// TestServerRequestsEndWithSession: when a client session ends while a backend's
// request waits for its answer, the backend is answered at once (not after the
// backend's own 60s sampling timeout): its call ends.
func TestServerRequestsEndWithSession(t *testing.T) {
	big := startBackend(t, "127.0.0.1:0", "--name", bigName)
	f := startLimited(t, httpBackend(bigName, big), "  max_pending_server_requests: 4\n", bigName, 1)
	stats := readStatsOf(t, big)
	rs := newRawSessionWith(t, f, `{"sampling":{}}`)

	resp, err := rs.Do(rs.NewRequest(context.Background(), http.MethodPost, sampleCall(7, "never answered")))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	// Read the call's stream until the backend's request arrives.
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	arrived := false
	for !arrived && sc.Scan() {
		arrived = strings.HasPrefix(sc.Text(), "data:") && strings.Contains(sc.Text(), `"sampling/createMessage"`)
	}
	if !arrived {
		t.Fatalf("no sampling/createMessage on the call's stream: %v", sc.Err())
	}
	if st, err := stats.read(); err != nil || st.InFlight != 1 {
		t.Fatalf("backend in flight = %+v (%v), want 1 sampling call", st, err)
	}
	if code := rs.close(); code != http.StatusOK && code != http.StatusNoContent {
		t.Fatalf("DELETE: HTTP %d", code)
	}
	var st backendStats
	if !testwait.Poll(wait, func() bool { st, err = stats.read(); return err == nil && st.InFlight == 0 }) {
		t.Fatalf("the backend's sampling call still waits %v after its client left: %+v %v", wait, st, err)
	}
	m, err := f.metrics()
	if err != nil {
		t.Fatal(err)
	}
	if dropped, expired := m.get("mcprouter_server_requests_dropped_total"), m.get("mcprouter_server_requests_expired_total"); dropped != 1 || expired != 0 {
		t.Errorf("server requests dropped %v, expired %v; want 1 and 0", dropped, expired)
	}
}

// TestSubscriptionLimit: a session subscribes to at most
// limits.max_subscriptions_per_session resources; beyond, a clear -32015, while
// subscribing again to one it holds, or after an unsubscribe, works, and other sessions
// have their own allowance. Both ways of keeping subscriptions are checked: per router
// process (no JetStream) and cluster-wide (JetStream).
func TestSubscriptionLimit(t *testing.T) {
	for _, mode := range []string{"local", "cluster"} {
		t.Run(mode, func(t *testing.T) {
			big := startBackend(t, "127.0.0.1:0", "--name", bigName, "--resources", "5")
			backends := httpBackend(bigName, big)
			if mode == "local" {
				backends += "nats:\n  no_jetstream: true\n"
			}
			f := startLimited(t, backends, "  max_subscriptions_per_session: 3\n", bigName, 1)
			rs := newRawSession(t, f)
			id := 100
			subscribe := func(rs *rawSession, method string, n int) ([]map[string]json.RawMessage, error) {
				id++
				return rs.post(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"resources/%s","params":{"uri":"item://%04d"}}`, id, method, n))
			}
			mustOK := func(rs *rawSession, method string, n int) {
				t.Helper()
				msgs, err := subscribe(rs, method, n)
				if code, msg, isErr := rpcErrorOf(msgs); err != nil || isErr {
					t.Fatalf("%s item://%04d: %v %d %s", method, n, err, code, msg)
				}
			}
			for n := 1; n <= 3; n++ {
				mustOK(rs, "subscribe", n)
			}
			msgs, err := subscribe(rs, "subscribe", 4)
			code, msg, isErr := rpcErrorOf(msgs)
			if err != nil || !isErr || code != -32015 || !strings.Contains(msg, "already holds 3 resource subscriptions") {
				t.Fatalf("a 4th subscription: err %v, JSON-RPC error %v %d %q; want -32015", err, isErr, code, msg)
			}
			mustOK(rs, "subscribe", 2) // held already: no new one
			mustOK(rs, "unsubscribe", 1)
			mustOK(rs, "subscribe", 4)
			other := newRawSession(t, f)
			for n := 1; n <= 3; n++ {
				mustOK(other, "subscribe", n)
			}
		})
	}
}

// TestUpstreamSessionCap: a stdio backend in per-client mode starts a child process for
// each client session. 40 sessions call it at once under limits.max_upstream_sessions 4:
// never more than 4 per-client children run at once (counted from /proc, besides the
// instance's shared child), every call is answered (those queued proceed as sessions end
// and their children stop), and once every session has ended only the shared child is
// left.
func TestUpstreamSessionCap(t *testing.T) {
	const sessions, limit = 40, 4
	backends := fmt.Sprintf("  - name: %[1]s\n    command: [%[2]q, stdio, --name, %[1]s, --tick, \"0\"]\n    sessions: per-client\n    timeout: %[3]s\n",
		kidsName, testbin.BuildFixture(t, testbin.Backend), backendTimeout)
	f := startLimited(t, backends, fmt.Sprintf("  max_upstream_sessions: %d\n  upstream_session_wait: 60s\n", limit), kidsName, 1)
	pid := f.router.Cmd.Process.Pid
	if n, err := children(pid); err != nil || n != 1 {
		t.Fatalf("before any session: %d children (%v), want the shared one", n, err)
	}

	// Watch the children while the sessions run.
	var peak atomic.Int64
	stop, watched := make(chan struct{}), make(chan struct{})
	watch := func() {
		if n, err := children(pid); err == nil && int64(n) > peak.Load() {
			peak.Store(int64(n))
		}
	}
	go func() {
		defer close(watched)
		watch()
		ctxtime.Every(stop, 2*time.Millisecond, watch)
	}()

	raws := make([]*rawSession, sessions)
	for i := range raws {
		raws[i] = newRawSession(t, f)
	}
	var wg sync.WaitGroup
	errs := make(chan error, sessions)
	for i, rs := range raws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			text := fmt.Sprintf("session %d", i)
			msgs, err := rs.post(fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"%s__echo","arguments":{"text":%q}}}`, kidsName, text))
			if err == nil {
				var got string
				var isError bool
				if got, isError, err = toolResult(msgs); err == nil && (isError || got != text) {
					err = fmt.Errorf("answered %q (isError %v)", got, isError)
				}
			}
			if err != nil {
				errs <- fmt.Errorf("session %d: %v", i, err)
			}
			rs.close()
		}()
	}
	wg.Wait()
	close(stop)
	<-watched
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if p := peak.Load(); p > limit+1 || p < 2 {
		t.Errorf("at most %d children ran at once, want 2..%d (the shared one and at most %d per-client)", p, limit+1, limit)
	}
	var n int
	if !testwait.Poll(wait, func() bool { n, _ = children(pid); return n == 1 }) {
		t.Errorf("%d children left after every session ended, want the shared one", n)
	}
	m, err := f.metrics()
	if err != nil {
		t.Fatal(err)
	}
	if open, refused := m.get("mcprouter_upstream_client_sessions"), m.get("mcprouter_upstream_client_sessions_refused_total"); open != 0 || refused != 0 {
		t.Errorf("after the sessions: %v per-client upstream sessions open, %v refused; want 0 and 0", open, refused)
	}
}

// children counts the live (not zombie) child processes of pid, from /proc.
func children(pid int) (int, error) {
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		return 0, err
	}
	n := 0
	for _, path := range stats {
		b, err := os.ReadFile(path)
		if err != nil {
			continue // it exited meanwhile
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses.
		s := string(b)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fields) < 2 || fields[0] == "Z" {
			continue
		}
		if ppid, _ := strconv.Atoi(fields[1]); ppid == pid {
			n++
		}
	}
	return n, nil
}

// TestServerRequestCancelledByBackend: a backend that gives up its request to a client
// (its own sampling timeout, then notifications/cancelled) takes it off the session's
// count: with room for one pending request, the session samples again and again.
func TestServerRequestCancelledByBackend(t *testing.T) {
	big := startBackend(t, "127.0.0.1:0", "--name", bigName, "--sample-timeout", "1s")
	f := startLimited(t, httpBackend(bigName, big), "  max_pending_server_requests: 1\n", bigName, 1)
	rs := newRawSessionWith(t, f, `{"sampling":{}}`)
	for i := 0; i < 3; i++ {
		msgs, err := rs.post(sampleCall(30+i, "given up by the backend"))
		text, isError, err2 := toolResult(msgs)
		if err != nil || err2 != nil || !isError || !strings.Contains(text, "did not answer the sampling request within 1s") {
			t.Fatalf("call %d: %v %v isError %v %q; want the backend's own timeout", i, err, err2, isError, text)
		}
	}
	if n := f.metric("mcprouter_server_requests_expired_total"); n != 0 {
		t.Errorf("mcprouter_server_requests_expired_total = %v, want 0 (the backend gave up first)", n)
	}
}
