package upstream

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/router/modern"
)

// modernServer answers like a 2026-07-28 server for what the test asks, and records the
// headers of each POST.
type modernServer struct {
	mu      sync.Mutex
	headers []http.Header
	reply   func(w http.ResponseWriter, body string)
}

func (s *modernServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.headers = append(s.headers, r.Header.Clone())
	s.mu.Unlock()
	s.reply(w, string(body))
}

func (s *modernServer) last() http.Header {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.headers[len(s.headers)-1]
}

func statelessOver(t *testing.T, url string) (Conn, *recSink) {
	t.Helper()
	h, sink := dialHTTP(t, url, HTTPOptions{Name: "modern"})
	t.Cleanup(func() { h.Close() })
	c, ok := Stateless(h)
	if !ok {
		t.Fatal("an HTTPConn has a stateless form")
	}
	if _, is := c.(*StatelessConn); !is {
		t.Fatalf("Stateless gave %T", c)
	}
	return c, sink
}

// TestStatelessHeaders: every POST carries the revision's headers, mirrored from the body
// as sent (a name outside plain ASCII in the Base64 form), and no session.
func TestStatelessHeaders(t *testing.T) {
	srv := &modernServer{reply: func(w http.ResponseWriter, body string) {
		var m codec.Message
		codec.Scan([]byte(body), &m)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, string(codec.AppendResult(nil, m.ID, []byte(`{"resultType":"complete"}`))))
	}}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	c, sink := statelessOver(t, ts.URL+"/mcp")
	cases := []struct {
		msg, method, name string
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}`, "tools/call", "echo"},
		{`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"caf\u00e9"}}`, "tools/call", "=?base64?Y2Fmw6k=?="},
		{`{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri":"file:///a b"}}`, "resources/read", "file:///a b"},
		{`{"jsonrpc":"2.0","id":4,"method":"tools/list","params":{}}`, "tools/list", ""},
		{`{"jsonrpc":"2.0","id":5,"method":"server/discover"}`, "server/discover", ""},
	}
	for _, tc := range cases {
		if err := c.Send(testCtx(t), []byte(tc.msg)); err != nil {
			t.Fatalf("%s: %v", tc.msg, err)
		}
		h := srv.last()
		if got := h.Get(modern.HeaderProtocolVersion); got != modern.Version {
			t.Errorf("%s: MCP-Protocol-Version %q", tc.msg, got)
		}
		if got := h.Get(modern.HeaderMethod); got != tc.method {
			t.Errorf("%s: Mcp-Method %q, want %q", tc.msg, got, tc.method)
		}
		if got := h.Get(modern.HeaderName); got != tc.name {
			t.Errorf("%s: Mcp-Name %q, want %q", tc.msg, got, tc.name)
		}
		if h.Get("Mcp-Session-Id") != "" {
			t.Errorf("%s: a session id went out", tc.msg)
		}
		var m codec.Message
		codec.Scan([]byte(tc.msg), &m)
		if sink.response(string(m.ID)) == nil {
			t.Errorf("%s: the reply was not delivered before Send returned", tc.msg)
		}
	}
	if err := c.Send(testCtx(t), []byte(`[{"jsonrpc":"2.0","id":9,"method":"ping"}]`)); err == nil {
		t.Error("a batch went out: 2026-07-28 has none")
	}
}

// TestStatelessErrorBody: a 4xx whose body is the JSON-RPC error of the request is its
// answer (-32022, -32601 on a 404...); any other 4xx is an unexpected status.
func TestStatelessErrorBody(t *testing.T) {
	srv := &modernServer{reply: func(w http.ResponseWriter, body string) {
		var m codec.Message
		codec.Scan([]byte(body), &m)
		switch string(m.Method) {
		case "ping":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, string(codec.AppendError(nil, m.ID, codec.CodeMethodNotFound, "method not found", nil)))
		case "tools/call":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, string(codec.AppendError(nil, []byte("999"), codec.CodeInvalidParams, "someone else's", nil)))
		default:
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, "bad request: missing session")
		}
	}}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	c, sink := statelessOver(t, ts.URL+"/mcp")
	if err := c.Send(testCtx(t), []byte(`{"jsonrpc":"2.0","id":7,"method":"ping"}`)); err != nil {
		t.Fatalf("a 404 carrying the request's JSON-RPC error: %v", err)
	}
	if r := sink.response("7"); r == nil || !strings.Contains(string(r), "-32601") {
		t.Fatalf("the error was not delivered as the answer: %s", r)
	}
	for _, msg := range []string{
		`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"x"}}`,
		`{"jsonrpc":"2.0","id":9,"method":"tools/list"}`,
	} {
		err := c.Send(testCtx(t), []byte(msg))
		var se *StatusError
		if !errors.As(err, &se) || se.Status != http.StatusBadRequest {
			t.Fatalf("%s: err %v, want the 400 as a StatusError", msg, err)
		}
	}
}

// TestStatelessStream: an SSE reply's notifications reach the Sink as the request's,
// before its response; a stream that ends without the response is lost, not resumed.
func TestStatelessStream(t *testing.T) {
	srv := &modernServer{reply: func(w http.ResponseWriter, body string) {
		var m codec.Message
		codec.Scan([]byte(body), &m)
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
		io.WriteString(w, "id: 1\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":\"x\"}}\n\n")
		if string(m.Name) == "cut" {
			return // the stream ends without the response
		}
		io.WriteString(w, "data: "+string(codec.AppendResult(nil, m.ID, []byte(`{}`)))+"\n\n")
	}}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	c, sink := statelessOver(t, ts.URL+"/mcp")
	if err := c.Send(testCtx(t), []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ok"}}`)); err != nil {
		t.Fatal(err)
	}
	if sink.response("1") == nil || sink.count(func(m *codec.Message) bool { return string(m.Method) == "notifications/message" }) != 1 {
		t.Fatal("the stream's log message and response were not both delivered")
	}
	err := c.Send(testCtx(t), []byte(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"cut"}}`))
	if !errors.Is(err, ErrStreamLost) {
		t.Fatalf("err %v, want ErrStreamLost", err)
	}
	srv.mu.Lock()
	n := len(srv.headers)
	srv.mu.Unlock()
	if n != 2 {
		t.Fatalf("%d requests, want the 2 POSTs: a lost stream is not resumed", n)
	}
}

// TestStatelessTransports: which transports have a stateless form.
func TestStatelessTransports(t *testing.T) {
	if _, ok := Stateless(&SSEConn{}); ok {
		t.Error("the legacy HTTP+SSE transport has no 2026-07-28 form")
	}
	in := &Instance{}
	if c, ok := Stateless(in); !ok || c != Conn(in) {
		t.Error("a stdio instance carries 2026-07-28 messages as they are")
	}
}
