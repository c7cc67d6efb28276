package upstream

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcprouter/mcprouter/codec"
)

func sdkSSEServer(t *testing.T) *httptest.Server {
	srv := newSDKServer("sse")
	ts := httptest.NewServer(mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	return ts
}

func TestSSELifecycleGoSDK(t *testing.T) {
	ts := sdkSSEServer(t)
	s := newRecSink()
	c, err := DialSSE(testCtx(t), ts.URL, HTTPOptions{Name: "legacy"}, s)
	if err != nil {
		t.Fatal(err)
	}
	doHandshake(t, c, s)
	ctx := testCtx(t)
	if err := c.Send(ctx, []byte(msgList)); err != nil {
		t.Fatal(err)
	}
	mustContain(t, s.waitResponse(t, "2"), `"name":"echo"`)
	if err := c.Send(ctx, []byte(msgCall(3, "echo", "old"))); err != nil {
		t.Fatal(err)
	}
	if got := resultText(t, s.waitResponse(t, "3")); got != "sse:old" {
		t.Fatalf("result %q", got)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Send(ctx, []byte(msgList)); !errors.Is(err, ErrClosed) {
		t.Fatalf("Send after Close: %v", err)
	}
	noLeaks(t)
}

// TestSSEReconnectsAndRenews drops every connection of a legacy backend: the session dies
// with its stream, and the Conn must come back on a new one by itself.
func TestSSEReconnectsAndRenews(t *testing.T) {
	ts := sdkSSEServer(t)
	s := newRecSink()
	c, err := DialSSE(testCtx(t), ts.URL, HTTPOptions{ReconnectMin: 10 * time.Millisecond}, s)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	doHandshake(t, c, s)
	ts.CloseClientConnections()
	s.waitFor(t, "EventDown then EventRenewed", func() bool { return s.hasEvent(EventDown) && s.hasEvent(EventRenewed) })
	if err := c.Send(testCtx(t), []byte(msgCall(11, "echo", "back"))); err != nil {
		t.Fatal(err)
	}
	if got := resultText(t, s.waitResponse(t, "11")); got != "sse:back" {
		t.Fatalf("result %q", got)
	}
	if n := s.count(func(m *codec.Message) bool { return strings.Contains(string(m.ID), "mcprouter-renew") }); n != 0 {
		t.Fatalf("%d renewal replies leaked to the Sink", n)
	}
}

// legacyServer is a hand-written 2024-11-05 server: it announces endpoint (formatted
// with the server's own URL) and answers every POSTed request on the stream.
func legacyServer(t *testing.T, endpoint func(base string) string) *httptest.Server {
	var mu sync.Mutex
	streams := map[string]chan []byte{}
	var n atomic.Int32
	var ts *httptest.Server
	ts = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodGet:
			id := fmt.Sprint(n.Add(1))
			ch := make(chan []byte, 16)
			mu.Lock()
			streams[id] = ch
			mu.Unlock()
			sseHeaders(w)
			fmt.Fprintf(w, "event: endpoint\ndata: %s\n\n", strings.ReplaceAll(endpoint(ts.URL), "{id}", id))
			w.(http.Flusher).Flush()
			for {
				select {
				case msg := <-ch:
					fmt.Fprintf(w, "event: message\ndata: %s\n\n", msg)
					w.(http.Flusher).Flush()
				case <-r.Context().Done():
					return
				}
			}
		case http.MethodPost:
			mu.Lock()
			ch := streams[r.URL.Query().Get("session")]
			mu.Unlock()
			if ch == nil {
				http.Error(w, "unknown session", http.StatusNotFound)
				return
			}
			body, _ := io.ReadAll(r.Body)
			var m codec.Message
			if codec.Scan(body, &m) == nil && m.Kind == codec.KindRequest {
				ch <- codec.AppendResult(nil, m.ID, []byte(`{"protocolVersion":"2025-06-18","echo":true}`))
			}
			w.WriteHeader(http.StatusAccepted)
			io.WriteString(w, "Accepted")
		}
	}))
	t.Cleanup(ts.Close)
	return ts
}

func TestSSEEndpointResolution(t *testing.T) {
	for _, tc := range []struct {
		name     string
		endpoint func(base string) string
		ok       bool
	}{
		{"relative-path", func(string) string { return "/messages?session={id}" }, true},
		{"relative-query", func(string) string { return "?session={id}" }, true},
		{"absolute-same-origin", func(b string) string { return b + "/messages?session={id}" }, true},
		{"other-origin", func(string) string { return "http://127.0.0.2:1/messages?session={id}" }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := legacyServer(t, tc.endpoint)
			s := newRecSink()
			c, err := DialSSE(testCtx(t), ts.URL+"/sse", HTTPOptions{}, s)
			if !tc.ok {
				if !errors.Is(err, ErrProtocol) {
					t.Fatalf("DialSSE: %v, want ErrProtocol", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if err := c.Send(testCtx(t), []byte(msgList)); err != nil {
				t.Fatal(err)
			}
			mustContain(t, s.waitResponse(t, "2"), `"echo":true`)
		})
	}
}

func TestSSEDialErrors(t *testing.T) {
	notSSE := scripted(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, "{}")
	})
	if _, err := DialSSE(testCtx(t), notSSE.URL, HTTPOptions{}, newRecSink()); !errors.Is(err, ErrProtocol) {
		t.Fatalf("non-SSE answer: %v, want ErrProtocol", err)
	}
	gone := scripted(t, func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) })
	var se *StatusError
	if _, err := DialSSE(testCtx(t), gone.URL, HTTPOptions{}, newRecSink()); !errors.As(err, &se) || se.Status != 404 {
		t.Fatalf("404: %v", err)
	}
	noEndpoint := scripted(t, func(w http.ResponseWriter, r *http.Request) {
		sseHeaders(w)
		io.WriteString(w, ": just a comment\n\n")
	})
	if _, err := DialSSE(testCtx(t), noEndpoint.URL, HTTPOptions{}, newRecSink()); err == nil {
		t.Fatal("a stream without endpoint was accepted")
	}
	noLeaks(t)
}
