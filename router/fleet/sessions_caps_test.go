package fleet

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/internal/testwait"
	"github.com/mcprouter/mcprouter/loadgen/sdktest"
	"github.com/mcprouter/mcprouter/router"
	"github.com/mcprouter/mcprouter/transport"
)

// startCapsBackend serves, on loopback, a Go SDK server (2025 sessions) whose tool
// caps answers the capabilities its session's client declared (of elicitation, roots,
// sampling, comma-separated), and whose tool needs_sampling refuses with -32021 when
// sampling is not among them, as the conformance server's test_missing_capability does.
func startCapsBackend(t testing.TB) string {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "caps", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "caps"}, func(ctx context.Context, req *mcp.CallToolRequest, _ any) (*mcp.CallToolResult, any, error) {
		var names []string
		if c := req.ClientCapabilities(); c != nil {
			if c.Elicitation != nil {
				names = append(names, "elicitation")
			}
			if c.RootsV2 != nil {
				names = append(names, "roots")
			}
			if c.Sampling != nil {
				names = append(names, "sampling")
			}
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Join(names, ",")}}}, nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "needs_sampling"}, func(ctx context.Context, req *mcp.CallToolRequest, _ any) (*mcp.CallToolResult, any, error) {
		if c := req.ClientCapabilities(); c != nil && c.Sampling != nil {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ran"}}}, nil, nil
		}
		return nil, nil, &jsonrpc.Error{Code: codec.CodeMissingCapability, Message: "sampling capability required but not declared by client",
			Data: json.RawMessage(`{"requiredCapabilities":{"sampling":{}}}`)}
	})
	return sdktest.Serve(t, srv)
}

// statusClient is a transport.RelayOutput that keeps the reply and its HTTP status.
type statusClient struct {
	reply chan statusReply
}

type statusReply struct {
	msg    []byte
	status int
}

func (c *statusClient) Related([]byte) error { return nil }

func (c *statusClient) Reply(msg []byte, status int) {
	c.reply <- statusReply{append([]byte(nil), msg...), status}
}

// sendWithCaps sends r a 2026-07-28 tools/call of tool whose client declares caps, and
// returns the client that reads its answer.
func sendWithCaps(t *testing.T, r *router.Router, tool, caps string) *statusClient {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + tool + `","arguments":{},` +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":` + caps + `}}}`
	c := &statusClient{reply: make(chan statusReply, 1)}
	if _, err := transport.ServeRelayed(r, []byte(body), nil, c); err != nil {
		t.Fatal(err)
	}
	return c
}

// callWithCaps sends n a 2026-07-28 tools/call of tool whose client declares caps, and
// returns the answer's text (or error code) and HTTP status: the one set on the
// exchange, else the one the HTTP transport gives a JSON reply (router.StatusOf).
func callWithCaps(t *testing.T, n *ownerNode, tool, caps string) (text string, code, status int) {
	t.Helper()
	c := sendWithCaps(t, n.r, tool, caps)
	r := testwait.Recv(t, "the answer to "+tool, 20*time.Second, c.reply)
	if r.status == 0 {
		r.status = router.StatusOf(r.msg)
	}
	var a struct {
		Result struct {
			Content []struct{ Text string }
		}
		Error *struct {
			Code int
			Data struct {
				RequiredCapabilities map[string]json.RawMessage `json:"requiredCapabilities"`
			}
		}
	}
	if err := json.Unmarshal(r.msg, &a); err != nil {
		t.Fatalf("answer %s: %v", r.msg, err)
	}
	if a.Error != nil {
		if a.Error.Code == codec.CodeMissingCapability && a.Error.Data.RequiredCapabilities["sampling"] == nil {
			t.Errorf("-32021 without requiredCapabilities naming sampling: %s", r.msg)
		}
		return "", a.Error.Code, r.status
	}
	if len(a.Result.Content) != 1 {
		t.Fatalf("answer %s, want one content item", r.msg)
	}
	return a.Result.Content[0].Text, 0, r.status
}

// TestCapsSessions: a 2026-07-28 client in front of a shared 2025 backend is served on
// an upstream session that declared the capabilities the client declared, so that the
// backend judges them as it judges its own 2025 clients' (sessions_caps.go): a tool
// needing sampling refuses a client that did not declare it with -32021 (HTTP 400,
// requiredCapabilities) and runs for one that did. Clients declaring the same share a
// session; one declaring what the router declares uses the shared session.
func TestCapsSessions(t *testing.T) {
	n := startOwnerNode(t, startCapsBackend(t), nil, nil)
	ss := n.f.sessions
	for _, c := range []struct {
		caps, want string
		sessions   int
	}{
		{`{}`, "", 1},
		{`{"sampling":{}}`, "sampling", 2},
		{`{"elicitation":{},"sampling":{}}`, "elicitation,sampling", 3},
		{`{"sampling":{},"elicitation":{}}`, "elicitation,sampling", 3}, // the same set
		{`{}`, "", 3},
		{routerCaps, "elicitation,roots,sampling", 3}, // the shared session
	} {
		text, code, _ := callWithCaps(t, n, "caps", c.caps)
		if code != 0 || text != c.want {
			t.Errorf("client declaring %s: the backend saw %q (error %d), want %q", c.caps, text, code, c.want)
		}
		if got := ss.capsCount(); got != c.sessions {
			t.Errorf("after a client declaring %s: %d sessions by capabilities, want %d", c.caps, got, c.sessions)
		}
	}
	if _, code, status := callWithCaps(t, n, "needs_sampling", `{}`); code != codec.CodeMissingCapability || status != 400 {
		t.Errorf("needs_sampling without sampling: error %d, HTTP %d; want -32021, 400", code, status)
	}
	if text, code, _ := callWithCaps(t, n, "needs_sampling", `{"sampling":{}}`); code != 0 || text != "ran" {
		t.Errorf("needs_sampling with sampling: %q, error %d", text, code)
	}
	if got := ss.inUse(); got != 3 {
		t.Errorf("%d slots of the upstream sessions' cap held, want 3", got)
	}
}

// TestPrincipalCapsSessions: with a per-client 2025 backend, a 2026-07-28 principal's
// clients get an upstream session per set of capabilities they declared, initialized
// with it (principalID), so that the backend judges each by its own.
func TestPrincipalCapsSessions(t *testing.T) {
	n := startNode(t, startCapsBackend(t), nil, nil, true)
	for _, c := range []struct{ caps, want string }{
		{`{}`, ""},
		{`{"sampling":{}}`, "sampling"},
		{`{}`, ""},
		{routerCaps, "elicitation,roots,sampling"},
	} {
		if text, code, _ := callWithCaps(t, n, "caps", c.caps); code != 0 || text != c.want {
			t.Errorf("client declaring %s: the backend saw %q (error %d), want %q", c.caps, text, code, c.want)
		}
	}
	if _, code, _ := callWithCaps(t, n, "needs_sampling", `{}`); code != codec.CodeMissingCapability {
		t.Errorf("needs_sampling without sampling: error %d, want -32021", code)
	}
	if p, slots := n.f.sessions.principalCount(), n.f.sessions.inUse(); p != 3 || slots != 3 {
		t.Errorf("%d principals, %d slots; want 3 each (one per set of capabilities)", p, slots)
	}
}

// TestCapsSessionsBound: past maxCapsSessions distinct sets on an instance, the one used
// least recently gives its place (and its slot) to the new one, once it has been unused
// for evictAfter; before that the new set is refused as overloaded, so that a session
// handed to a request is not closed before the request is sent on it.
func TestCapsSessionsBound(t *testing.T) {
	n := startOwnerNode(t, startCapsBackend(t), nil, nil)
	ss := n.f.sessions
	b := n.f.set.all()[0]
	in := b.instances[0]
	set := func(i int) string { return `{"sampling":{"n":` + strconv.Itoa(i) + `}}` }
	for i := range maxCapsSessions + 1 {
		if i == maxCapsSessions {
			if _, code, _ := callWithCaps(t, n, "caps", set(i)); code != codec.CodeOverloaded {
				t.Fatalf("a set past the bound while every other was used within evictAfter: error %d, want %d", code, codec.CodeOverloaded)
			}
			// Their clients' calls are a second old: the oldest may give its place.
			ss.caps.mu.Lock()
			for _, cc := range ss.caps.m[in] {
				cc.last.Add(-int64(evictAfter))
			}
			ss.caps.mu.Unlock()
		}
		if text, code, _ := callWithCaps(t, n, "caps", set(i)); code != 0 || text != "sampling" {
			t.Fatalf("set %d: %q, error %d", i, text, code)
		}
	}
	// The evicted session gives its slot back once closed, in the background.
	testwait.For(t, "the evicted session's slot given back", 20*time.Second, func() bool {
		return ss.capsCount() == maxCapsSessions && ss.inUse() == maxCapsSessions
	})
	ss.caps.mu.Lock()
	_, first := ss.caps.m[in][string(appendDeclared(nil, []byte(set(0))))]
	ss.caps.mu.Unlock()
	if first {
		t.Fatal("the set used least recently kept its session")
	}
}

// TestCapsSessionsIdle: a set unused for its backend's SessionIdle is closed by the
// reaper, its slot given back; the next client declaring it opens a new session.
func TestCapsSessionsIdle(t *testing.T) {
	n := startOwnerNode(t, startCapsBackend(t), nil, nil)
	ss := n.f.sessions
	n.f.set.all()[0].cfg.SessionIdle = 20 * time.Millisecond // before the reaper starts
	for range 2 {
		if text, code, _ := callWithCaps(t, n, "caps", `{}`); code != 0 || text != "" {
			t.Fatalf("%q, error %d", text, code)
		}
		testwait.For(t, "the idle session by capabilities closed", 20*time.Second, func() bool { return ss.capsCount() == 0 && ss.inUse() == 0 })
	}
}

// TestAppendDeclared: the key of a set of capabilities keeps what a 2025 backend can
// ask for, in a fixed order.
func TestAppendDeclared(t *testing.T) {
	for in, want := range map[string]string{
		`{}`: `{}`,
		`{"sampling":{},"experimental":{"x":{}},"elicitation":{"form":{}}}`: `{"elicitation":{"form":{}},"sampling":{}}`,
		routerCaps: `{"elicitation":{},"roots":{"listChanged":true},"sampling":{}}`,
		`not json`: `{}`,
	} {
		if got := string(appendDeclared(nil, []byte(in))); got != want {
			t.Errorf("appendDeclared(%s) = %s, want %s", in, got, want)
		}
	}
	if routerDeclared != `{"elicitation":{},"roots":{"listChanged":true},"sampling":{}}` {
		t.Errorf("routerDeclared = %s", routerDeclared)
	}
}

// TestCapsSessionsRetired: removing a backend closes the sessions 2026 clients' declared
// capabilities had with it, and gives their slots back.
func TestCapsSessionsRetired(t *testing.T) {
	n := startOwnerNode(t, startCapsBackend(t), nil, nil)
	if _, code, _ := callWithCaps(t, n, "caps", `{}`); code != 0 {
		t.Fatalf("error %d", code)
	}
	ss := n.f.sessions
	ss.caps.mu.Lock()
	var c *upConn
	for _, set := range ss.caps.m {
		for _, cc := range set {
			c = cc.c
		}
	}
	ss.caps.mu.Unlock()
	if c == nil {
		t.Fatal("no session by capabilities open")
	}
	r := n.f.Reconfigure(nil)
	testwait.Recv(t, "the backend drained", 10*time.Second, r.Drained)
	testwait.For(t, "the session by capabilities closed", 10*time.Second, func() bool {
		return c.dead() && ss.capsCount() == 0 && ss.inUse() == 0
	})
}

// BenchmarkCapsKey is the per-request work of finding a 2026 client's session by its
// declared capabilities (capsConn's fast path): the key built in a pooled buffer and
// looked up, with no allocation.
func BenchmarkCapsKey(b *testing.B) {
	caps := []byte(`{"elicitation":{"form":{}},"sampling":{"tools":{}},"extensions":{"x.example/y":{}}}`)
	m := map[string]*capsConn{string(appendDeclared(nil, caps)): {}}
	b.ReportAllocs()
	b.SetBytes(int64(len(caps)))
	for b.Loop() {
		bp := getBuf()
		*bp = appendDeclared((*bp)[:0], caps)
		if m[string(*bp)] == nil {
			b.Fatal("not found")
		}
		putBuf(bp)
	}
}
