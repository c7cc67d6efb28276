package mcpraw_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

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

// TestRequestHeaders: a POST and a GET carry the session's headers, Header replaces
// them or adds its own, an empty value removes one; FastPost builds the POST a Client
// would, with and without a session.
func TestRequestHeaders(t *testing.T) {
	ctx := context.Background()
	c := &mcpraw.Client{URL: "http://127.0.0.1/mcp", Token: "tok", Session: "s1"}
	for _, tc := range []struct {
		method string
		header http.Header
		want   map[string]string
	}{
		{http.MethodPost, nil, map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
			"Authorization": "Bearer tok", "Mcp-Session-Id": "s1", "Mcp-Protocol-Version": mcpraw.DefaultVersion}},
		{http.MethodGet, nil, map[string]string{"Content-Type": "", "Accept": "text/event-stream", "Mcp-Session-Id": "s1"}},
		{http.MethodPost, http.Header{"Accept": {"text/event-stream"}, "traceparent": {"00-1"}, "MCP-Protocol-Version": {""}},
			map[string]string{"Accept": "text/event-stream", "Traceparent": "00-1", "Mcp-Protocol-Version": "", "Mcp-Session-Id": "s1"}},
	} {
		c.Header = tc.header
		req := c.NewRequest(ctx, tc.method, `{}`)
		for k, want := range tc.want {
			if got := req.Header.Get(k); got != want {
				t.Errorf("%s with Header %v: %s = %q, want %q", tc.method, tc.header, k, got, want)
			}
		}
		if w, listed := tc.want["Mcp-Protocol-Version"]; listed && w == "" && req.Header.Values("Mcp-Protocol-Version") != nil {
			t.Errorf("%s with Header %v: the version header was not removed", tc.method, tc.header)
		}
	}

	req := fasthttp.AcquireRequest()
	defer fasthttp.ReleaseRequest(req)
	for _, tc := range []struct{ sid, version, wantVersion string }{
		{"", "2025-06-18", ""}, {"s2", "", mcpraw.DefaultVersion}, {"s2", "2025-06-18", "2025-06-18"},
	} {
		req.Header.Set("X-Left-Over", "1") // FastPost starts afresh
		mcpraw.FastPost(req, "http://127.0.0.1:1/mcp", tc.sid, tc.version)
		got := map[string]string{"method": string(req.Header.Method()), "uri": req.URI().String(),
			"Content-Type": string(req.Header.ContentType()), "Accept": string(req.Header.Peek("Accept")),
			"Mcp-Session-Id": string(req.Header.Peek("Mcp-Session-Id")), "MCP-Protocol-Version": string(req.Header.Peek("MCP-Protocol-Version")),
			"X-Left-Over": string(req.Header.Peek("X-Left-Over"))}
		want := map[string]string{"method": "POST", "uri": "http://127.0.0.1:1/mcp", "Content-Type": "application/json",
			"Accept": "application/json, text/event-stream", "Mcp-Session-Id": tc.sid, "MCP-Protocol-Version": tc.wantVersion, "X-Left-Over": ""}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("FastPost(%q, %q):\n got %v\nwant %v", tc.sid, tc.version, got, want)
		}
	}
}
