package transport

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/mcprouter/mcprouter/internal/mcpraw"
	"github.com/mcprouter/mcprouter/internal/testwait"
	"github.com/mcprouter/mcprouter/transport/closewatch"
	"github.com/mcprouter/mcprouter/transport/readahead"
	"github.com/mcprouter/mcprouter/transport/sse"
)

// TestGetStreamOwnsConnection: GET streams on a real loopback listener (the router's:
// read-ahead connections, fasthttp keeping hijacked connections), where events are
// written by the publishing goroutine and an idle stream holds no handler: the priming
// event, events in order, keep-alives from the sweep, and a clean end of the response
// when the session ends; a change notice sent to two sessions in turn (one encoding,
// shared) goes out on each stream with its own id, and is replayed on resumption; then a
// last session's stream gets the retry hint at shutdown.
func TestGetStreamOwnsConnection(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := newTestHandler()
	stats := new(sse.Stats)
	cfg := HTTPConfig{
		Rules:              DefaultHTTPRules(ln.Addr().String(), testRevisions, "2025-03-26"),
		Stream:             sse.StreamConfig{Stats: stats},
		KeepAlive:          20 * time.Millisecond,
		KeepsHijackedConns: true,
	}
	reg := NewRegistry(RegistryConfig{}, h)
	hs := NewHTTPServer(cfg, reg, h)
	srv := &fasthttp.Server{Handler: hs.ServeStreamable, KeepHijackedConns: true, NoDefaultContentType: true, Logger: quietLogger{}}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(readahead.Listen(ln)) }()
	defer func() {
		close(h.release)
		srv.Shutdown()
		<-served
		reg.Close()
	}()
	url := "http://" + ln.Addr().String() + "/mcp"
	cl := &http.Client{Timeout: waitLimit}
	const v = "2025-11-25"
	post := func(sid, body string) *http.Response {
		t.Helper()
		resp := send(t, cl, url, http.MethodPost, sid, body, nil)
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	// get opens session sid's GET stream, resuming after lastID if it is not empty.
	get := func(sid, lastID string) (*http.Response, *sse.Reader) {
		t.Helper()
		var resume http.Header
		if lastID != "" {
			resume = http.Header{sse.HeaderLastEventID: {lastID}}
		}
		resp := send(t, cl, url, http.MethodGet, sid, "", resume)
		if resp.StatusCode != 200 {
			t.Fatalf("GET: %d", resp.StatusCode)
		}
		return resp, sse.NewReader(resp.Body, 0)
	}
	open := func() (string, *http.Response, *sse.Reader) {
		t.Helper()
		sid := post("", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"`+v+`"}}`).Header.Get(HeaderSessionID)
		if sid == "" {
			t.Fatal("no session")
		}
		resp, rd := get(sid, "")
		if ev := readEvents(t, rd, 1)[0]; ev.ID != "0-0" || ev.Data != "" {
			t.Fatalf("first event %+v, want the priming event", ev)
		}
		return sid, resp, rd
	}

	sid, resp, rd := open()
	post(sid, `{"jsonrpc":"2.0","id":2,"method":"broadcast","params":{"count":3}}`)
	for i, ev := range readEvents(t, rd, 3) {
		if want := "0-" + string(rune('1'+i)); ev.ID != want {
			t.Errorf("event %d has id %q, want %q", i, ev.ID, want)
		}
	}
	waitFor(t, "keep-alives on the idle stream", func() bool { return stats.KeepAlives.Load() >= 2 })
	dr := send(t, cl, url, http.MethodDelete, sid, "", nil)
	dr.Body.Close()
	if dr.StatusCode != 200 {
		t.Fatalf("DELETE: %v", dr)
	}
	if _, err := rd.Next(); !errors.Is(err, io.EOF) {
		t.Errorf("after DELETE the stream read %v, want a clean end (EOF)", err)
	}
	resp.Body.Close()
	waitFor(t, "the stream counted closed", func() bool { return hs.Stats.OpenStreams.Load() == 0 })

	sidA, respA, rdA := open()
	defer respA.Body.Close()
	post(sidA, `{"jsonrpc":"2.0","id":2,"method":"broadcast","params":{"count":1}}`)
	readEvents(t, rdA, 1)
	sidB, respB, rdB := open()
	notice := `{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"memo://a"}}`
	for _, id := range []string{sidA, sidB} {
		sess, ok := reg.Get([]byte(id))
		if !ok {
			t.Fatalf("session %s not registered", id)
		}
		if err := sess.SendNotice([]byte(notice)); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		rd *sse.Reader
		id string
	}{{rdA, "0-2"}, {rdB, "0-1"}} {
		if ev := readEvents(t, c.rd, 1)[0]; ev.ID != c.id || ev.Data != notice {
			t.Errorf("notice %+v, want id %s and the notice", ev, c.id)
		}
	}
	respB.Body.Close()
	respB, rdB = get(sidB, "0-0")
	defer respB.Body.Close()
	if ev := readEvents(t, rdB, 1)[0]; ev.ID != "0-1" || ev.Data != notice {
		t.Errorf("resumed after 0-0: %+v, want the notice as 0-1", ev)
	}

	_, resp, rd = open()
	defer resp.Body.Close()
	hs.Shutdown()
	if evs := readEvents(t, rd, -1); len(evs) != 0 || rd.Retry() != 1000 {
		t.Errorf("at shutdown the stream got %+v and retry %d, want the retry hint alone", evs, rd.Retry())
	}
}

// heldServer serves h on a real loopback listener as the router does (read-ahead
// connections, fasthttp keeping hijacked connections unless cfg says otherwise, when
// each stream's handler waits for its end), with keep-alives an hour apart
// so that only the close watcher can notice a client's close, and a close watcher of
// its own, whose registrations the test counts.
type heldServer struct {
	hs  *HTTPServer
	w   *closewatch.Watcher
	url string
	cl  *http.Client
}

func startHeld(t *testing.T, h Handler, cfg HTTPConfig) *heldServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	w, err := closewatch.New()
	if err != nil {
		t.Skip("no close watcher here:", err)
	}
	cfg.Rules = DefaultHTTPRules(ln.Addr().String(), testRevisions, "2025-03-26")
	cfg.KeepAlive = time.Hour
	reg := NewRegistry(RegistryConfig{}, h)
	hs := NewHTTPServer(cfg, reg, h)
	hs.watcher = w
	route := func(ctx *fasthttp.RequestCtx) { // the Streamable HTTP endpoint, and a legacy stream's
		if string(ctx.Path()) == "/sse" {
			hs.ServeLegacyStream(ctx)
			return
		}
		hs.ServeStreamable(ctx)
	}
	srv := &fasthttp.Server{Handler: route, KeepHijackedConns: cfg.KeepsHijackedConns, NoDefaultContentType: true, Logger: quietLogger{}}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(readahead.Listen(ln)) }()
	tr := &http.Transport{}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		hs.Shutdown()
		srv.Shutdown()
		<-served
		reg.Close()
		w.Close()
	})
	return &heldServer{hs: hs, w: w, url: "http://" + ln.Addr().String() + "/mcp", cl: &http.Client{Transport: tr, Timeout: waitLimit}}
}

// send sends a request of 2025-11-25 session sid ("" for none) to url with cl, header
// set over the session's headers, and returns the response, its body unread.
func send(t *testing.T, cl *http.Client, url, method, sid, body string, header http.Header) *http.Response {
	t.Helper()
	c := &mcpraw.Client{URL: url, Version: "2025-11-25", Session: sid, HTTP: cl, Header: header}
	resp, err := c.Do(c.NewRequest(context.Background(), method, body))
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// do sends a request of session sid ("" for none) and returns the response, its body
// unread.
func (s *heldServer) do(t *testing.T, method, sid, body string) *http.Response {
	t.Helper()
	return send(t, s.cl, s.url, method, sid, body, nil)
}

// openGet opens a session and its GET stream, and reads the priming event: by then the
// stream's connection is registered with the close watcher (before the response's head
// is written).
func (s *heldServer) openGet(t *testing.T) (string, *http.Response, *sse.Reader) {
	t.Helper()
	resp := s.do(t, http.MethodPost, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}`)
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	sid := resp.Header.Get(HeaderSessionID)
	if sid == "" {
		t.Fatal("no session")
	}
	resp = s.do(t, http.MethodGet, sid, "")
	if resp.StatusCode != 200 {
		t.Fatalf("GET: %d", resp.StatusCode)
	}
	rd := sse.NewReader(resp.Body, 0)
	if ev := readEvents(t, rd, 1)[0]; ev.ID != "0-0" {
		t.Fatalf("first event %+v, want the priming event", ev)
	}
	return sid, resp, rd
}

// TestHeldStreamsCloseWatch: GET streams are registered with the close watcher; a
// client's close ends its stream at once (keep-alives are an hour apart), and a stream
// that ends first (its session deleted) leaves the watcher while its client still holds
// the connection: no registration outlives its stream.
func TestHeldStreamsCloseWatch(t *testing.T) {
	s := startHeld(t, newTestHandler(), HTTPConfig{KeepsHijackedConns: true})
	const n = 20
	type held struct {
		sid  string
		resp *http.Response
		rd   *sse.Reader
	}
	hs := make([]held, n)
	for i := range hs {
		hs[i].sid, hs[i].resp, hs[i].rd = s.openGet(t)
	}
	if got := s.w.Len(); got != n {
		t.Fatalf("%d registrations for %d streams", got, n)
	}
	for i := 0; i < n; i += 2 {
		hs[i].resp.Body.Close() // the client leaves
	}
	waitFor(t, "the left streams to end", func() bool { return s.hs.Stats.OpenStreams.Load() == n/2 })
	if got := s.w.Len(); got != n/2 {
		t.Errorf("%d registrations for %d streams", got, n/2)
	}
	for i := 1; i < n; i += 2 {
		dr := s.do(t, http.MethodDelete, hs[i].sid, "")
		io.Copy(io.Discard, dr.Body)
		dr.Body.Close()
		if _, err := hs[i].rd.Next(); !errors.Is(err, io.EOF) {
			t.Errorf("after DELETE the stream read %v, want a clean end", err)
		}
	}
	waitFor(t, "every stream counted closed", func() bool { return s.hs.Stats.OpenStreams.Load() == 0 })
	if got := s.w.Len(); got != 0 {
		t.Errorf("%d registrations after every stream ended", got)
	}
	for i := 1; i < n; i += 2 {
		hs[i].resp.Body.Close()
	}
}

// TestHeldStreamDescriptorReuse: streams opened and closed in a loop, their connections'
// descriptors reused by the next ones, each ended by its client's close (which only the
// close watcher notices) or by its session's end: every close reaches its own stream, and
// nothing stays registered; with the server keeping hijacked connections (the router's
// way) and without (fasthttp closes the connection when the stream's handler returns).
func TestHeldStreamDescriptorReuse(t *testing.T) {
	for _, keeps := range []bool{true, false} {
		t.Run(fmt.Sprintf("keeps=%v", keeps), func(t *testing.T) {
			s := startHeld(t, newTestHandler(), HTTPConfig{KeepsHijackedConns: keeps})
			for i := range 30 {
				sid, resp, _ := s.openGet(t)
				if i%3 == 2 {
					dr := s.do(t, http.MethodDelete, sid, "")
					io.Copy(io.Discard, dr.Body)
					dr.Body.Close()
				}
				resp.Body.Close()
				waitFor(t, "the stream to end", func() bool { return s.hs.Stats.OpenStreams.Load() == 0 })
				if got := s.w.Len(); got != 0 {
					t.Fatalf("round %d: %d registrations after the stream ended", i, got)
				}
			}
		})
	}
}

// TestLegacyStreamCloseWatch: a legacy HTTP+SSE stream is the session's life, and its
// connection is watched: the client's close of it ends the session at once, with no
// keep-alive due for an hour, and leaves nothing registered.
func TestLegacyStreamCloseWatch(t *testing.T) {
	h := newTestHandler()
	s := startHeld(t, h, HTTPConfig{})
	req, err := http.NewRequest(http.MethodGet, strings.TrimSuffix(s.url, "/mcp")+"/sse", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	resp, err := s.cl.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET /sse: %d %s", resp.StatusCode, b)
	}
	ev := readEvents(t, sse.NewReader(resp.Body, 0), 1)[0]
	sid, ok := strings.CutPrefix(ev.Data, "/message?sessionId=")
	if ev.Event != "endpoint" || !ok {
		t.Fatalf("first event %+v, want the endpoint", ev)
	}
	if got := s.w.Len(); got != 1 {
		t.Fatalf("%d registrations for the one stream", got)
	}
	resp.Body.Close() // the client leaves
	waitFor(t, "the stream to end", func() bool { return s.hs.Stats.OpenStreams.Load() == 0 })
	h.checkClosedOnly(t, sid)
	if got := s.w.Len(); got != 0 {
		t.Errorf("%d registrations after the stream ended", got)
	}
}

// TestStatelessStreamCloseWatch: a stateless request's stream (held open by the
// handler, as subscriptions/listen is) on the router's kind of connection is watched
// without a goroutine of its own, and the client's closing it cancels the request at
// once; bytes the client sends first (it should send none) change nothing.
func TestStatelessStreamCloseWatch(t *testing.T) {
	h := &statelessHandler{abandoned: make(chan string, 4), gate: make(chan struct{}), release: make(chan struct{})}
	s := startHeld(t, h, HTTPConfig{StatelessStreamAfter: -1, KeepsHijackedConns: true})
	t.Cleanup(func() { close(h.gate) })
	addr := strings.TrimSuffix(strings.TrimPrefix(s.url, "http://"), "/mcp")
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(waitLimit))
	if _, err := c.Write(rawStatelessRequest(addr, 1, "wait")); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	if line, err := br.ReadString('}'); err != nil || !strings.Contains(line, "text/event-stream") || !strings.Contains(line, "notifications/progress") {
		t.Fatalf("the stream's first event: %q %v", line, err)
	}
	if got := s.w.Len(); got != 1 {
		t.Fatalf("%d registrations for the one stream", got)
	}
	if _, err := c.Write([]byte("unexpected bytes\r\n")); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if got := testwait.Recv(t, "OnAbandon after the client left", waitLimit, h.abandoned); got != "wait" {
		t.Errorf("abandoned %q", got)
	}
	waitFor(t, "the stream to end", func() bool { return s.hs.Stats.OpenStreams.Load() == 0 })
	if got := s.w.Len(); got != 0 {
		t.Errorf("%d registrations after the stream ended", got)
	}
}
