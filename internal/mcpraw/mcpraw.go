// Package mcpraw is a Streamable HTTP client written by hand, for the tests that need
// what an SDK client hides: the HTTP status and headers, the exact bytes, a session id
// of their choosing, or a session carried to another instance's endpoint. It builds the
// one request every such test used to write out (Content-Type, Accept, Authorization,
// Mcp-Session-Id, MCP-Protocol-Version) and reads a JSON or SSE reply; FastPost builds
// the same POST for the benchmarks that send with fasthttp.
//
// A Client is used by one goroutine at a time; Requests built from it may be sent from
// any goroutine.
package mcpraw

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// DefaultVersion is the MCP-Protocol-Version a Client sends when Version is empty.
const DefaultVersion = "2025-11-25"

// maxReply bounds what Post reads of a reply.
const maxReply = 16 << 20

// Client is one client of the MCP endpoint URL.
type Client struct {
	URL     string
	Token   string       // sent as a Bearer token when set
	Version string       // MCP-Protocol-Version sent with a session id; DefaultVersion when empty
	Session string       // Mcp-Session-Id, sent when set; the first reply that carries one sets it
	HTTP    *http.Client // http.DefaultClient when nil

	// Header is set on every request after the headers above, over them: what a test
	// sends of its own (an Accept of one type, a trace context, a version without a
	// session). An empty value removes the header, for the tests of a missing one.
	Header http.Header
}

// Reply is an answer read to its end.
type Reply struct {
	Status int
	Header http.Header
	Body   []byte
}

// NewRequest builds a request to c.URL within ctx: a POST of body, or with no body the
// GET that opens the session's event stream (DELETE and others take no body either),
// with the headers of c's session.
func (c *Client) NewRequest(ctx context.Context, method, body string) *http.Request {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.URL, rd)
	if err != nil {
		panic("mcpraw: " + err.Error()) // a bad URL or method: the test's own mistake
	}
	if method == http.MethodGet {
		req.Header.Set("Accept", "text/event-stream")
	} else {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	if c.Session != "" {
		req.Header.Set("Mcp-Session-Id", c.Session)
		req.Header.Set("MCP-Protocol-Version", versionOr(c.Version))
	}
	for k, vs := range c.Header {
		req.Header.Del(k)
		for _, v := range vs {
			if v != "" {
				req.Header.Add(k, v)
			}
		}
	}
	return req
}

// Do sends req with c's HTTP client; a reply's session id becomes c's when c has none.
func (c *Client) Do(req *http.Request) (*http.Response, error) {
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err == nil && c.Session == "" {
		c.Session = resp.Header.Get("Mcp-Session-Id")
	}
	return resp, err
}

// Post sends body (one message or a batch) and reads the reply to its end (an SSE
// reply to the end of its stream).
func (c *Client) Post(ctx context.Context, body string) (*Reply, error) {
	resp, err := c.Do(c.NewRequest(ctx, http.MethodPost, body))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxReply))
	return &Reply{Status: resp.StatusCode, Header: resp.Header, Body: b}, err
}

// Initialize opens a session: initialize at c.Version (DefaultVersion when empty) with
// the client capabilities caps (raw JSON, "{}" when empty), then
// notifications/initialized, which must be accepted (202). It returns the initialize
// reply, whatever its status; c.Session is set when the server made a session.
func (c *Client) Initialize(ctx context.Context, caps string) (*Reply, error) {
	v := versionOr(c.Version)
	if caps == "" {
		caps = "{}"
	}
	r, err := c.Post(ctx, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"`+v+`","capabilities":`+caps+`,"clientInfo":{"name":"mcpraw","version":"1"}}}`)
	if err != nil || r.Status != http.StatusOK {
		return r, err
	}
	n, err := c.Post(ctx, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if err == nil && n.Status != http.StatusAccepted {
		err = fmt.Errorf("notifications/initialized: HTTP %d: %s", n.Status, n.Body)
	}
	return r, err
}

// versionOr is v, or DefaultVersion when v is empty.
func versionOr(v string) string {
	if v == "" {
		return DefaultVersion
	}
	return v
}

// String is the status and the body, for a test's failure message.
func (r *Reply) String() string {
	if r == nil {
		return "no reply"
	}
	return fmt.Sprintf("HTTP %d: %s", r.Status, r.Body)
}

// Messages returns the JSON-RPC messages of the reply: the body of a JSON reply, or the
// data of each event of an SSE reply (the priming event, with no data, gives none).
func (r *Reply) Messages() [][]byte {
	if !strings.HasPrefix(r.Header.Get("Content-Type"), "text/event-stream") {
		if len(bytes.TrimSpace(r.Body)) == 0 {
			return nil
		}
		return [][]byte{r.Body}
	}
	var msgs [][]byte
	sc := bufio.NewScanner(bytes.NewReader(r.Body))
	sc.Buffer(make([]byte, 64<<10), maxReply)
	for sc.Scan() {
		if d, ok := bytes.CutPrefix(sc.Bytes(), []byte("data:")); ok {
			if d = bytes.TrimSpace(d); len(d) > 0 {
				msgs = append(msgs, bytes.Clone(d))
			}
		}
	}
	return msgs
}

// ModernVersion is the revision NewModernRequest claims.
const ModernVersion = "2026-07-28"

// NewModernRequest builds a 2026-07-28 POST of body to url within ctx: no session, the
// revision's header and its routing headers (Mcp-Method, and Mcp-Name when name is set).
// The request's _meta is body's to carry.
func NewModernRequest(ctx context.Context, url, body, method, name string) *http.Request {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		panic("mcpraw: " + err.Error()) // a bad URL: the test's own mistake
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", ModernVersion)
	req.Header.Set("Mcp-Method", method)
	if name != "" {
		req.Header.Set("Mcp-Name", name)
	}
	return req
}

// Event is one event of an SSE stream: its id and its data lines, joined.
type Event struct{ ID, Data string }

// ReadEvents reads the SSE stream r to its end, sends out every event that carries data
// (a priming event has none), and closes out.
func ReadEvents(r io.Reader, out chan<- Event) {
	defer close(out)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxReply)
	var ev Event
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "id:"):
			ev.ID = strings.TrimSpace(line[3:])
		case strings.HasPrefix(line, "data:"):
			ev.Data += strings.TrimSpace(line[5:])
		case line == "":
			if ev.Data != "" {
				out <- ev
			}
			ev = Event{}
		}
	}
}
