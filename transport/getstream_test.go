package transport

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

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
		req, _ := http.NewRequest("POST", url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		for k, val := range sessionHeaders(sid, v) {
			if sid != "" {
				req.Header.Set(k, val)
			}
		}
		resp, err := cl.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	// get opens session sid's GET stream, resuming after lastID if it is not empty.
	get := func(sid, lastID string) (*http.Response, *sse.Reader) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		t.Cleanup(cancel)
		req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
		req.Header.Set("Accept", "text/event-stream")
		for k, val := range sessionHeaders(sid, v) {
			req.Header.Set(k, val)
		}
		if lastID != "" {
			req.Header.Set(sse.HeaderLastEventID, lastID)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
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
	req, _ := http.NewRequest("DELETE", url, nil)
	for k, val := range sessionHeaders(sid, v) {
		req.Header.Set(k, val)
	}
	if dr, err := cl.Do(req); err != nil || dr.StatusCode != 200 {
		t.Fatalf("DELETE: %v %v", dr, err)
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
