package upstream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/internal/testbin"
)

type echoIn struct {
	Text string `json:"text"`
}

// newSDKServer is an official Go SDK server with one tool, "echo", whose text result
// carries the server's generation so that tests can tell restarts apart.
func newSDKServer(gen string) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "sdk-" + gen, Version: "1.0.0"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "echoes"},
		func(ctx context.Context, req *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: gen + ":" + in.Text}}}, nil, nil
		})
	return s
}

// swapHandler lets a test "restart" a backend in place: a new handler forgets every
// session, as a restarted process would. It also counts requests by method.
type swapHandler struct {
	mu      sync.Mutex
	h       http.Handler
	deletes atomic.Int32
	gets    atomic.Int32
	inits   atomic.Int32
}

func (s *swapHandler) set(h http.Handler) {
	s.mu.Lock()
	s.h = h
	s.mu.Unlock()
}

func (s *swapHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodDelete:
		s.deletes.Add(1)
	case http.MethodGet:
		s.gets.Add(1)
	case http.MethodPost:
		b, _ := io.ReadAll(r.Body)
		if strings.Contains(string(b), `"method":"initialize"`) {
			s.inits.Add(1)
		}
		r.Body = io.NopCloser(bytes.NewReader(b))
	}
	s.mu.Lock()
	h := s.h
	s.mu.Unlock()
	h.ServeHTTP(w, r)
}

func sdkHandler(gen string, jsonResponse bool) http.Handler {
	srv := newSDKServer(gen)
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{JSONResponse: jsonResponse})
}

// handshake runs initialize and initialized through c and returns the negotiated
// version.
func doHandshake(t *testing.T, c Conn, s *recSink) {
	t.Helper()
	ctx := testCtx(t)
	if err := c.Send(ctx, []byte(msgInit)); err != nil {
		t.Fatalf("initialize: %v", err)
	}
	reply := s.waitResponse(t, "1")
	mustContain(t, reply, `"protocolVersion":"2025-06-18"`)
	c.SetProtocolVersion("2025-06-18")
	if err := c.Send(ctx, []byte(msgInitialized)); err != nil {
		t.Fatalf("initialized: %v", err)
	}
}

func TestHTTPLifecycleGoSDK(t *testing.T) {
	for _, tc := range []struct {
		name string
		json bool
	}{{"sse-replies", false}, {"json-replies", true}} {
		t.Run(tc.name, func(t *testing.T) {
			sw := &swapHandler{}
			sw.set(sdkHandler("g1", tc.json))
			srv := httptest.NewServer(sw)
			defer srv.Close()
			c, s := dialHTTP(t, srv.URL, HTTPOptions{Name: "sdk"})
			doHandshake(t, c, s)
			if c.SessionID() == "" {
				t.Fatal("no session id captured from the initialize reply")
			}
			ctx := testCtx(t)
			if err := c.Send(ctx, []byte(msgList)); err != nil {
				t.Fatal(err)
			}
			// Streamable HTTP delivers the reply before Send returns.
			if r := s.response("2"); r == nil {
				t.Fatal("tools/list reply not delivered before Send returned")
			} else {
				mustContain(t, r, `"name":"echo"`)
			}
			if err := c.Send(ctx, []byte(msgCall(3, "echo", "hi"))); err != nil {
				t.Fatal(err)
			}
			if got := resultText(t, s.response("3")); got != "g1:hi" {
				t.Fatalf("tools/call result %q", got)
			}
			if err := c.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			// Close waits for the DELETE's answer only deleteAnswerWait: on a busy
			// machine the backend may take it later.
			s.waitFor(t, "the DELETE", func() bool { return sw.deletes.Load() > 0 })
			if sw.deletes.Load() != 1 {
				t.Fatalf("Close sent %d DELETEs, want 1", sw.deletes.Load())
			}
			if err := c.Send(ctx, []byte(msgList)); !errors.Is(err, ErrClosed) {
				t.Fatalf("Send after Close: %v, want ErrClosed", err)
			}
			<-c.Done()
			noLeaks(t)
		})
	}
}

func TestHTTPConcurrentSends(t *testing.T) {
	srv := httptest.NewServer(sdkHandler("g1", false))
	defer srv.Close()
	c, s := dialHTTP(t, srv.URL, HTTPOptions{MaxConns: 4})
	defer c.Close()
	doHandshake(t, c, s)
	const workers, each = 6, 10
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				id := 100 + w*each + i
				if err := c.Send(testCtx(t), []byte(msgCall(id, "echo", fmt.Sprint(id)))); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for id := 100; id < 100+workers*each; id++ {
		if got := resultText(t, s.response(fmt.Sprint(id))); got != fmt.Sprintf("g1:%d", id) {
			t.Fatalf("id %d: result %q", id, got)
		}
	}
}

func TestHTTPGetStreamDeliversServerNotifications(t *testing.T) {
	srv := newSDKServer("g1")
	sw := &swapHandler{}
	sw.set(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	ts := httptest.NewServer(sw)
	defer ts.Close()
	c, s := dialHTTP(t, ts.URL, HTTPOptions{})
	doHandshake(t, c, s)
	c.StartStream()
	c.StartStream() // idempotent
	s.waitFor(t, "the GET stream to open", func() bool { return sw.gets.Load() >= 1 })
	isListChanged := func(m *codec.Message) bool {
		return m.Kind == codec.KindNotification && string(m.Method) == "notifications/tools/list_changed"
	}
	// The stream may open a moment after the GET arrived: keep changing the tool list
	// (bounded) until a notification comes through.
	for i := 0; i < 200 && s.count(isListChanged) == 0; i++ {
		mcp.AddTool(srv, &mcp.Tool{Name: fmt.Sprint("t", i)}, func(context.Context, *mcp.CallToolRequest, echoIn) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{}, nil, nil
		})
		time.Sleep(10 * time.Millisecond)
	}
	s.waitFor(t, "notifications/tools/list_changed on the GET stream", func() bool { return s.count(isListChanged) > 0 })
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	noLeaks(t)
}

func TestHTTPSessionRenewalAfterRestart(t *testing.T) {
	sw := &swapHandler{}
	sw.set(sdkHandler("g1", false))
	srv := httptest.NewServer(sw)
	defer srv.Close()
	c, s := dialHTTP(t, srv.URL, HTTPOptions{})
	defer c.Close()
	doHandshake(t, c, s)
	old := c.SessionID()

	sw.set(sdkHandler("g2", false)) // the backend restarts and forgets the session
	// tools/call is not safe to retry blindly, but a 404 proves the backend never
	// processed it, so it is retried on the renewed session. Several callers meet the
	// 404 at once: one renewal serves them all.
	var wg sync.WaitGroup
	for id := 7; id < 12; id++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.Send(testCtx(t), []byte(msgCall(id, "echo", "again"))); err != nil {
				t.Errorf("Send %d after restart: %v", id, err)
			}
		}()
	}
	wg.Wait()
	for id := 7; id < 12; id++ {
		if got := resultText(t, s.response(fmt.Sprint(id))); got != "g2:again" {
			t.Fatalf("id %d: result %q", id, got)
		}
	}
	if n := sw.inits.Load(); n != 2 {
		t.Fatalf("backend saw %d initialize requests, want 2 (the router's and one renewal)", n)
	}
	if c.SessionID() == old || c.SessionID() == "" {
		t.Fatalf("session not renewed: %q -> %q", old, c.SessionID())
	}
	if !s.hasEvent(EventRenewed) {
		t.Fatalf("no EventRenewed; events %v", s.eventList())
	}
	// The renewal's own initialize reply is the Conn's business, not the router's.
	if n := s.count(func(m *codec.Message) bool { return strings.Contains(string(m.ID), "mcprouter-renew") }); n != 0 {
		t.Fatalf("%d renewal replies leaked to the Sink", n)
	}
	select {
	case <-c.Done():
		t.Fatalf("Conn died: %v", c.Err())
	default:
	}
}

func TestHTTPSessionExpiredWithoutRenewal(t *testing.T) {
	sw := &swapHandler{}
	sw.set(sdkHandler("g1", true))
	srv := httptest.NewServer(sw)
	defer srv.Close()
	c, s := dialHTTP(t, srv.URL, HTTPOptions{NoRenew: true})
	defer c.Close()
	doHandshake(t, c, s)
	sw.set(sdkHandler("g2", true))
	err := c.Send(testCtx(t), []byte(msgList))
	if !errors.Is(err, ErrSessionExpired) {
		t.Fatalf("Send: %v, want ErrSessionExpired", err)
	}
	<-c.Done()
	if !errors.Is(c.Err(), ErrSessionExpired) || !s.hasEvent(EventExpired) {
		t.Fatalf("Err %v, events %v", c.Err(), s.eventList())
	}
}

// TestHTTPRealRestart stops the backend's listener (every connection dies) and starts
// a new backend on the same address: the pooled connections are stale, the session is
// unknown, and a tools/call must still go through.
func TestHTTPRealRestart(t *testing.T) {
	oldProbe := idleProbe
	idleProbe = 0 // probe every reused connection: the test cannot wait for idleness
	defer func() { idleProbe = oldProbe }()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	srv1 := &httptest.Server{Listener: ln, Config: &http.Server{Handler: sdkHandler("g1", false)}}
	srv1.Start()
	c, s := dialHTTP(t, srv1.URL, HTTPOptions{})
	defer c.Close()
	doHandshake(t, c, s)
	if err := c.Send(testCtx(t), []byte(msgCall(3, "echo", "one"))); err != nil {
		t.Fatal(err)
	}
	srv1.Close()

	// While it is down: a clear error.
	err = c.Send(testCtx(t), []byte(msgCall(4, "echo", "down")))
	if !errors.Is(err, ErrBackendDown) {
		t.Fatalf("Send while down: %v, want ErrBackendDown", err)
	}

	ln2, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("cannot listen on %s again: %v", addr, err)
	}
	srv2 := &httptest.Server{Listener: ln2, Config: &http.Server{Handler: sdkHandler("g2", false)}}
	srv2.Start()
	defer srv2.Close()
	if err := c.Send(testCtx(t), []byte(msgCall(5, "echo", "two"))); err != nil {
		t.Fatalf("Send after restart: %v", err)
	}
	if got := resultText(t, s.response("5")); got != "g2:two" {
		t.Fatalf("result %q", got)
	}
	if !s.hasEvent(EventRenewed) {
		t.Fatalf("no EventRenewed; events %v", s.eventList())
	}
}

// scripted serves one test's hand-written responses.
func scripted(t *testing.T, h http.HandlerFunc) *httptest.Server {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

func sseHeaders(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
}

func TestHTTPStatusErrors(t *testing.T) {
	for _, tc := range []struct {
		status   int
		body     string
		isDown   bool
		excerpts string
	}{
		{500, "internal failure", false, "internal failure"},
		{503, "overloaded", true, "overloaded"},
		{415, strings.Repeat("x", 1000), false, strings.Repeat("x", maxExcerpt)},
		{400, "", false, ""},
	} {
		for _, pipeline := range []int{0, 1} { // the pool streams the body, the pipeline reads it whole
			t.Run(fmt.Sprintf("%d/pipeline=%d", tc.status, pipeline), func(t *testing.T) {
				srv := scripted(t, func(w http.ResponseWriter, r *http.Request) {
					w.WriteHeader(tc.status)
					io.WriteString(w, tc.body)
				})
				c, _ := dialHTTP(t, srv.URL, HTTPOptions{Pipeline: pipeline})
				defer c.Close()
				err := c.Send(testCtx(t), []byte(msgList))
				var se *StatusError
				if !errors.As(err, &se) || se.Status != tc.status || se.Method != "POST" {
					t.Fatalf("err %v, want StatusError %d", err, tc.status)
				}
				if string(se.Body) != tc.excerpts {
					t.Fatalf("body excerpt %q, want %q", se.Body, tc.excerpts)
				}
				if errors.Is(err, ErrBackendDown) != tc.isDown {
					t.Fatalf("Is(ErrBackendDown) = %v", !tc.isDown)
				}
			})
		}
	}
}

// TestHTTPConnectionRefused: a refused connection never carried the message: it is
// ErrBackendDown alone, never ErrNoResponse.
func TestHTTPConnectionRefused(t *testing.T) {
	c, _ := dialHTTP(t, "http://"+testbin.FreeAddr(t)+"/mcp", HTTPOptions{})
	defer c.Close()
	err := c.Send(testCtx(t), []byte(msgCall(5, "echo", "hi")))
	if !errors.Is(err, ErrBackendDown) || errors.Is(err, ErrNoResponse) {
		t.Fatalf("Send: %v, want ErrBackendDown and not ErrNoResponse", err)
	}
}

// TestHTTPResumesSSEReply: the backend closes the POST's stream before the response (the
// 2025-11-25 polling pattern) after a priming event; the client resumes with GET and
// Last-Event-ID and gets the response there.
func TestHTTPResumesSSEReply(t *testing.T) {
	var gotLastID atomic.Value
	srv := scripted(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodPost:
			sseHeaders(w)
			io.WriteString(w, "id: s1-0\nretry: 10\ndata:\n\n")
			io.WriteString(w, `id: s1-1`+"\n"+`data: {"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}`+"\n\n")
		case http.MethodGet:
			gotLastID.Store(r.Header.Get("Last-Event-ID"))
			sseHeaders(w)
			io.WriteString(w, `id: s1-2`+"\n"+`data: {"jsonrpc":"2.0","id":9,"result":{"ok":true}}`+"\n\n")
		}
	})
	c, s := dialHTTP(t, srv.URL, HTTPOptions{})
	defer c.Close()
	if err := c.Send(testCtx(t), []byte(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"x"}}`)); err != nil {
		t.Fatal(err)
	}
	if s.response("9") == nil {
		t.Fatal("response not delivered")
	}
	if id, _ := gotLastID.Load().(string); id != "s1-1" {
		t.Fatalf("Last-Event-ID %q, want s1-1", id)
	}
	if n := s.count(func(m *codec.Message) bool { return string(m.Method) == "notifications/progress" }); n != 1 {
		t.Fatalf("%d progress notifications, want 1", n)
	}
}

func TestHTTPStreamLostWithoutEventIDs(t *testing.T) {
	srv := scripted(t, func(w http.ResponseWriter, r *http.Request) {
		sseHeaders(w)
		io.WriteString(w, `data: {"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}}`+"\n\n")
	})
	c, _ := dialHTTP(t, srv.URL, HTTPOptions{})
	defer c.Close()
	if err := c.Send(testCtx(t), []byte(msgList)); !errors.Is(err, ErrStreamLost) {
		t.Fatalf("Send: %v, want ErrStreamLost", err)
	}
}

// TestHTTPLingerCutsOpenStream: a backend that keeps the reply stream open after the
// response must not hold Send.
func TestHTTPLingerCutsOpenStream(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	srv := scripted(t, func(w http.ResponseWriter, r *http.Request) {
		sseHeaders(w)
		io.WriteString(w, `data: {"jsonrpc":"2.0","id":2,"result":{"tools":[]}}`+"\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	c, s := dialHTTP(t, srv.URL, HTTPOptions{})
	defer c.Close()
	if err := c.Send(testCtx(t), []byte(msgList)); err != nil {
		t.Fatal(err)
	}
	if s.response("2") == nil {
		t.Fatal("response not delivered")
	}
}

func TestHTTPSendsHeaders(t *testing.T) {
	var mu sync.Mutex
	seen := map[string][]string{}
	srv := scripted(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		for _, h := range []string{"Accept", "Content-Type", "Mcp-Session-Id", "Mcp-Protocol-Version", "Authorization"} {
			seen[h] = append(seen[h], r.Header.Get(h))
		}
		mu.Unlock()
		var body [4096]byte
		n, _ := io.ReadFull(r.Body, body[:])
		if strings.Contains(string(body[:n]), `"initialize"`) {
			w.Header().Set("Mcp-Session-Id", "sess-1")
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-06-18","capabilities":{},"serverInfo":{"name":"s","version":"1"}}}`)
			return
		}
		w.WriteHeader(http.StatusAccepted)
	})
	c, s := dialHTTP(t, srv.URL, HTTPOptions{Headers: map[string]string{"Authorization": "Bearer t"}})
	doHandshake(t, c, s)
	c.Close()
	mu.Lock()
	defer mu.Unlock()
	want := map[string][]string{
		"Accept":               {"application/json, text/event-stream", "application/json, text/event-stream", ""},
		"Content-Type":         {"application/json", "application/json", ""},
		"Mcp-Session-Id":       {"", "sess-1", "sess-1"},
		"Mcp-Protocol-Version": {"", "2025-06-18", "2025-06-18"},
		"Authorization":        {"Bearer t", "Bearer t", "Bearer t"},
	}
	for h, w := range want {
		if fmt.Sprint(seen[h]) != fmt.Sprint(w) {
			t.Errorf("%s: got %q, want %q (initialize, initialized, DELETE)", h, seen[h], w)
		}
	}
}

func TestHTTPOptionsValidation(t *testing.T) {
	for _, tc := range []struct {
		url  string
		opts HTTPOptions
	}{
		{"ftp://127.0.0.1/x", HTTPOptions{}},
		{"http:///nohost", HTTPOptions{}},
		{"http://u:p@127.0.0.1/", HTTPOptions{}},
		{"http://127.0.0.1/", HTTPOptions{Headers: map[string]string{"mcp-session-id": "x"}}},
	} {
		if _, err := DialHTTP(context.Background(), tc.url, tc.opts, newRecSink()); err == nil {
			t.Errorf("DialHTTP(%q, %v) accepted", tc.url, tc.opts.Headers)
		}
	}
}

// TestHTTPServerRequestDuringCall: a tool that asks the client something (roots/list)
// before it can answer. The question arrives on the POST's SSE stream while Send is
// still waiting; the router answers it with a concurrent Send, and the call completes.
func TestHTTPServerRequestDuringCall(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "asker", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "ask"}, func(ctx context.Context, req *mcp.CallToolRequest, _ echoIn) (*mcp.CallToolResult, any, error) {
		roots, err := req.Session.ListRoots(ctx, nil)
		if err != nil {
			return nil, nil, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprint("roots:", len(roots.Roots))}}}, nil, nil
	})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	defer ts.Close()

	var c *HTTPConn
	answered := make(chan error, 1)
	s := newRecSink()
	sink := SinkFuncs{
		OnMessage: func(msg []byte) {
			s.Message(msg)
			var m codec.Message
			if codec.Scan(msg, &m) == nil && m.Kind == codec.KindRequest && string(m.Method) == "roots/list" {
				reply := codec.AppendResult(nil, m.ID, []byte(`{"roots":[{"uri":"file:///a"},{"uri":"file:///b"}]}`))
				go func() { answered <- c.Send(testCtx(t), reply) }()
			}
		},
		OnEvent: s.Event,
	}
	var err error
	c, err = DialHTTP(testCtx(t), ts.URL, HTTPOptions{}, sink)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := testCtx(t)
	init := strings.Replace(msgInit, `"capabilities":{}`, `"capabilities":{"roots":{"listChanged":false}}`, 1)
	if err := c.Send(ctx, []byte(init)); err != nil {
		t.Fatal(err)
	}
	c.SetProtocolVersion("2025-06-18")
	if err := c.Send(ctx, []byte(msgInitialized)); err != nil {
		t.Fatal(err)
	}
	if err := c.Send(ctx, []byte(msgCall(4, "ask", ""))); err != nil {
		t.Fatal(err)
	}
	if err := <-answered; err != nil {
		t.Fatalf("answering roots/list: %v", err)
	}
	if got := resultText(t, s.response("4")); got != "roots:2" {
		t.Fatalf("result %q", got)
	}
}
