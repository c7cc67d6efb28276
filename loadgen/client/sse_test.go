package client

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/transport/sse"
)

// The parser itself is tested (golden files, split points, fuzzing) in transport/sse.
// These tests cover what the client adds on top: which events carry messages, how the
// retry time and the size limit are taken, and the reuse of a pooled reader.

// streamInput is a stream whose events exercise the client's choices: a priming event
// that sets retry, an event of another type, an unnamed and an explicit "message" event,
// and an invalid retry that must not replace the valid one.
const streamInput = "retry: 250\nid: p\ndata:\n\n" +
	"event: endpoint\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"skipped/endpoint\"}\n\n" +
	"id: 1\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/a\"}\n\n" +
	"retry: 1x\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/b\"}\n\n"

// recordingMux returns a mux that appends the method of every notification to *got.
func recordingMux(got *[]string) *mux {
	return newMux(0, func(_ int, m *codec.Message, _ time.Time) { *got = append(*got, string(m.Method)) })
}

func TestIsMessage(t *testing.T) {
	for typ, want := range map[string]bool{"": true, "message": true, "endpoint": false, "Message": false, "message ": false} {
		ev := sse.Event{Event: []byte(typ)}
		if got := isMessage(ev); got != want {
			t.Errorf("isMessage(%q) = %v", typ, got)
		}
		if typ == "" && eventType(ev) != "message" {
			t.Errorf("eventType of an unnamed event = %q", eventType(ev))
		}
	}
}

func TestGetStreamRead(t *testing.T) {
	var got []string
	g := &getStream{mux: recordingMux(&got), retry: time.Second}
	rd := sse.NewReader(strings.NewReader(streamInput), 1<<10)
	if err := g.read(rd); err != io.EOF {
		t.Fatalf("read: %v, want io.EOF", err)
	}
	if want := "notifications/a notifications/b"; strings.Join(got, " ") != want {
		t.Errorf("delivered %q, want %q", got, want)
	}
	if g.retry != 250*time.Millisecond {
		t.Errorf("retry %v, want 250ms", g.retry)
	}
	if string(rd.LastEventID()) != "1" {
		t.Errorf("last event id %q, want 1 (what a reconnect sends)", rd.LastEventID())
	}

	rd.Reset(strings.NewReader("data: " + strings.Repeat("x", 2<<10) + "\n\n"))
	var e *Error
	if err := g.read(rd); !errors.As(err, &e) || e.Class != ClassProtocol {
		t.Fatalf("oversized event: err %v, want a protocol error", err)
	}
}

func TestLegacyStreamRead(t *testing.T) {
	tests := []struct {
		name  string
		in    string
		want  string
		class Class
	}{
		{"ends", streamInput, "notifications/a notifications/b", ClassTransport},
		{"oversized event", "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/a\"}\n\ndata: " + strings.Repeat("x", 2<<10) + "\n\n", "notifications/a", ClassProtocol},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			s := &sseSession{mux: recordingMux(&got), done: make(chan struct{})}
			s.read(&http.Response{Body: io.NopCloser(strings.NewReader(tt.in))}, sse.NewReader(strings.NewReader(tt.in), 1<<10))
			if strings.Join(got, " ") != tt.want {
				t.Errorf("delivered %q, want %q", got, tt.want)
			}
			if _, err := s.mux.register(1); err == nil || err.Class != tt.class {
				t.Errorf("after the stream: %v, want class %v", err, tt.class)
			}
		})
	}
}

// TestSSEReplies answers POSTs with event streams framed in different legal ways. Each
// session makes several calls, so the pooled reader is reused after each framing,
// including after a reply followed by an incomplete event it must forget.
func TestSSEReplies(t *testing.T) {
	const reply = `{"jsonrpc":"2.0","id":%s,"result":{"ok":true}}`
	tests := []struct{ name, body string }{
		{"plain", "data: " + reply + "\n\n"},
		{"CRLF, comment and retry", ": hi\r\nretry: 10\r\n\r\ndata: " + reply + "\r\n\r\n"},
		{"CR only", "data: " + reply + "\r\r"},
		{"priming event first", "id: 1-0\ndata:\n\nid: 1-1\ndata: " + reply + "\n\n"},
		{"BOM", "\xEF\xBB\xBFdata: " + reply + "\n\n"},
		{"notification first", "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{}}\n\nevent: message\ndata: " + reply + "\n\n"},
		{"data split over lines", "data: {\"jsonrpc\":\"2.0\",\ndata: \"id\":%s,\"result\":{\"ok\":true}}\n\n"},
		{"incomplete event after the reply", "data: " + reply + "\n\nid: 9\ndata: {\"partial"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			url := edgeServer(t, func(ctx *fasthttp.RequestCtx) {
				var m codec.Message
				if err := codec.Scan(ctx.PostBody(), &m); err != nil {
					ctx.SetStatusCode(fasthttp.StatusBadRequest)
					return
				}
				ctx.SetContentType("text/event-stream")
				ctx.SetBodyString(fmt.Sprintf(tt.body, m.ID))
			})
			s := dialTest(t, Options{URL: url}, 0)
			for i := range 3 {
				var rep Reply
				if err := s.Call(&Request{Method: "tools/call", Params: []byte(`{"name":"x"}`)}, time.Now().Add(5*time.Second), &rep); err != nil {
					t.Fatalf("call %d: %v", i, err)
				}
				if string(rep.Result) != `{"ok":true}` {
					t.Fatalf("call %d: result %s", i, rep.Result)
				}
			}
		})
	}
}
