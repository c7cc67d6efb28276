package mcpraw_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/cmd/mcpbackend/mcpbackendtest"
	"github.com/mcprouter/mcprouter/cmd/mcpbackend/server"
	"github.com/mcprouter/mcprouter/internal/mcpraw"
)

// TestSession against the reference backend: Initialize opens a session, later
// requests carry it (a call is answered), Messages reads a JSON and an SSE reply alike,
// and a request without the session is refused as the revision says.
func TestSession(t *testing.T) {
	s := mcpbackendtest.Start(t, server.Config{Name: "ref", Tick: -1})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := &mcpraw.Client{URL: s.URL(), Version: "2025-06-18"}
	r, err := c.Initialize(ctx, `{"sampling":{}}`)
	if err != nil || r.Status != http.StatusOK || c.Session == "" {
		t.Fatalf("initialize: %v %v, session %q", err, r, c.Session)
	}
	if msgs := r.Messages(); len(msgs) != 1 || !strings.Contains(string(msgs[0]), `"protocolVersion":"2025-06-18"`) {
		t.Fatalf("initialize reply: %q", msgs)
	}
	r, err = c.Post(ctx, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`)
	if err != nil || r.Status != http.StatusOK {
		t.Fatalf("tools/call: %v %v", err, r)
	}
	msgs := r.Messages()
	if len(msgs) == 0 || !strings.HasPrefix(string(msgs[len(msgs)-1]), `{"jsonrpc":"2.0","id":2,"result":`) || !strings.Contains(string(msgs[len(msgs)-1]), `"hi"`) {
		t.Fatalf("tools/call reply (%s): %q", r.Header.Get("Content-Type"), msgs)
	}
	other := &mcpraw.Client{URL: s.URL()}
	if r, err := other.Post(ctx, `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`); err != nil || r.Status != http.StatusBadRequest {
		t.Fatalf("tools/list without a session: %v %v", err, r)
	}
}

// TestMessagesSSE: each event's data is one message; the priming event (no data) and
// other fields give none.
func TestMessagesSSE(t *testing.T) {
	r := &mcpraw.Reply{Header: http.Header{"Content-Type": {"text/event-stream"}},
		Body: []byte("id: 0\ndata:\n\nid: 1\nevent: message\ndata: {\"a\":1}\n\nretry: 5\ndata: {\"b\":2}\n\n")}
	if got := r.Messages(); len(got) != 2 || string(got[0]) != `{"a":1}` || string(got[1]) != `{"b":2}` {
		t.Errorf("Messages = %q", got)
	}
	if got := (&mcpraw.Reply{Header: http.Header{}, Body: nil}).Messages(); got != nil {
		t.Errorf("an empty JSON body gives %q", got)
	}
}
