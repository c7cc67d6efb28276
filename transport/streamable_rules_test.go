package transport

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/transport/sse"
)

// TestStreamableRules is the HTTP rule table of Streamable HTTP, run at every revision a
// Streamable HTTP session can negotiate: status codes, content types and headers for
// each kind of request.
func TestStreamableRules(t *testing.T) {
	type row struct {
		name       string
		r          req
		noSession  bool   // send without Mcp-Session-Id
		badSession bool   // send an unknown Mcp-Session-Id
		status     int    // expected status
		ctype      string // expected Content-Type prefix ("" = no body expected)
		body       string // substring of the body
		header     string // a header that must be present, "Name: value"
		onlyFrom   string // row applies from this revision on
		onlyUpTo   string // row applies up to this revision
	}
	const ping = `{"jsonrpc":"2.0","id":7,"method":"ping"}`
	rows := []row{
		{name: "request gets JSON", r: req{body: ping}, status: 200, ctype: "application/json", body: `"id":7,"result":{}`},
		{name: "request id string", r: req{body: `{"jsonrpc":"2.0","id":"a-1","method":"ping"}`}, status: 200, ctype: "application/json", body: `"id":"a-1"`},
		{name: "request Accept JSON only", r: req{body: ping, headers: map[string]string{"Accept": "application/json"}}, status: 200, ctype: "application/json"},
		{name: "request Accept SSE only", r: req{body: ping, headers: map[string]string{"Accept": "text/event-stream"}}, status: 200, ctype: "text/event-stream", body: `"id":7,"result":{}`},
		{name: "request Accept */*", r: req{body: ping, headers: map[string]string{"Accept": "*/*"}}, status: 200, ctype: "application/json"},
		{name: "request Accept absent", r: req{body: ping, headers: map[string]string{"Accept": ""}}, status: 200, ctype: "application/json"},
		{name: "request Accept html", r: req{body: ping, headers: map[string]string{"Accept": "text/html"}}, status: 406, ctype: "application/json", body: "Accept"},
		{name: "request with q=0 JSON and SSE", r: req{body: ping, headers: map[string]string{"Accept": "application/json;q=0, text/event-stream;q=0"}}, status: 406},
		{name: "notification Accept html", r: req{body: `{"jsonrpc":"2.0","method":"notifications/initialized"}`, headers: map[string]string{"Accept": "text/html"}}, status: 406},
		{name: "request Accept wildcards", r: req{body: ping, headers: map[string]string{"Accept": "application/*, text/*"}}, status: 200, ctype: "application/json"},
		{name: "request Accept with parameters", r: req{body: ping, headers: map[string]string{"Accept": "text/event-stream;q=0.5, application/json;q=0.9"}}, status: 200, ctype: "application/json"},
		{name: "progress upgrades to SSE", r: req{body: `{"jsonrpc":"2.0","id":8,"method":"progress","params":{"count":2}}`}, status: 200, ctype: "text/event-stream", body: `"id":8,"result":{"sent":2}`, header: "X-Accel-Buffering: no"},
		{name: "progress without SSE stays JSON", r: req{body: `{"jsonrpc":"2.0","id":8,"method":"progress","params":{"count":2}}`, headers: map[string]string{"Accept": "application/json"}}, status: 200, ctype: "application/json", body: `"id":8,"result":{"sent":2}`},
		{name: "notification gets 202", r: req{body: `{"jsonrpc":"2.0","method":"notifications/initialized"}`}, status: 202},
		{name: "response gets 202", r: req{body: `{"jsonrpc":"2.0","id":"s1","result":{}}`}, status: 202},
		{name: "error response gets 202", r: req{body: `{"jsonrpc":"2.0","id":"s1","error":{"code":-1,"message":"no"}}`}, status: 202},
		{name: "unknown method", r: req{body: `{"jsonrpc":"2.0","id":9,"method":"nope"}`}, status: 200, body: `-32601`},
		{name: "parse error", r: req{body: `{"jsonrpc":`}, status: 400, ctype: "application/json", body: `-32700`},
		{name: "invalid request", r: req{body: `{"jsonrpc":"1.0","id":1,"method":"ping"}`}, status: 400, body: `-32600`},
		{name: "empty body", r: req{body: ``}, status: 400, body: `-32700`},
		{name: "content type text", r: req{body: ping, headers: map[string]string{"Content-Type": "text/plain"}}, status: 415},
		{name: "content type with charset", r: req{body: ping, headers: map[string]string{"Content-Type": "application/json; charset=utf-8"}}, status: 200},
		{name: "no session", r: req{body: ping}, noSession: true, status: 400, body: "Mcp-Session-Id"},
		{name: "unknown session", r: req{body: ping}, badSession: true, status: 404, body: "session not found"},
		{name: "bad protocol version header", r: req{body: ping, headers: map[string]string{HeaderProtocolVersion: "1999-01-01"}}, status: 400, body: "MCP-Protocol-Version"},
		{name: "batch", r: req{body: "[" + ping + "]"}, status: 200, ctype: "application/json", body: `[{"jsonrpc":"2.0","id":7,"result":{}}]`, onlyUpTo: "2025-03-26"},
		{name: "batch refused", r: req{body: "[" + ping + "]"}, status: 400, body: "batches are not supported", onlyFrom: "2025-06-18"},
		{name: "method PUT", r: req{method: "PUT", body: ping}, status: 405, header: "Allow: GET, POST, DELETE"},
		{name: "method PATCH no session", r: req{method: "PATCH"}, noSession: true, status: 405},
		{name: "GET no session", r: req{method: "GET"}, noSession: true, status: 400},
		{name: "GET unknown session", r: req{method: "GET"}, badSession: true, status: 404},
		{name: "GET without SSE accept", r: req{method: "GET", headers: map[string]string{"Accept": "application/json"}}, status: 406, body: "text/event-stream"},
		{name: "GET Accept html", r: req{method: "GET", headers: map[string]string{"Accept": "text/html"}}, status: 406},
		{name: "GET SSE with q=0", r: req{method: "GET", headers: map[string]string{"Accept": "text/event-stream;q=0, application/json"}}, status: 406},
		{name: "GET bad version", r: req{method: "GET", headers: map[string]string{HeaderProtocolVersion: "x"}}, status: 400},
		{name: "GET bad Last-Event-ID", r: req{method: "GET", headers: map[string]string{HeaderLastEventID: "nonsense"}}, status: 400, body: "Last-Event-ID"},
		{name: "GET Last-Event-ID of unknown stream", r: req{method: "GET", headers: map[string]string{HeaderLastEventID: "99-1"}}, status: 404},
		{name: "GET Last-Event-ID beyond stream", r: req{method: "GET", headers: map[string]string{HeaderLastEventID: "0-5"}}, status: 400, body: "resume"},
		{name: "DELETE no session", r: req{method: "DELETE"}, noSession: true, status: 400},
		{name: "DELETE bad version", r: req{method: "DELETE", headers: map[string]string{HeaderProtocolVersion: "x"}}, status: 400},
		{name: "DELETE unknown session", r: req{method: "DELETE"}, badSession: true, status: 404},
		{name: "bad Origin", r: req{body: ping, headers: map[string]string{"Origin": "http://evil.example"}}, status: 403, body: "origin"},
		{name: "null Origin", r: req{body: ping, headers: map[string]string{"Origin": "null"}}, status: 403},
		{name: "loopback Origin", r: req{body: ping, headers: map[string]string{"Origin": "http://localhost:5173"}}, status: 200},
		{name: "bad Host", r: req{body: ping, headers: map[string]string{"Host": "evil.example"}}, status: 403, body: "host"},
		{name: "bad Host with port", r: req{body: ping, headers: map[string]string{"Host": "rebind.example:8080"}}, status: 403},
		{name: "localhost Host", r: req{body: ping, headers: map[string]string{"Host": "localhost:8080"}}, status: 200},
		{name: "IPv6 loopback Host", r: req{body: ping, headers: map[string]string{"Host": "[::1]:8080"}}, status: 200},
	}
	for _, v := range []string{"2025-03-26", "2025-06-18", "2025-11-25"} {
		t.Run(v, func(t *testing.T) {
			ts := newTestServer(t, serverOpts{})
			sid := ts.initialize(v)
			for _, rw := range rows {
				if (rw.onlyFrom != "" && v < rw.onlyFrom) || (rw.onlyUpTo != "" && v > rw.onlyUpTo) {
					continue
				}
				t.Run(rw.name, func(t *testing.T) {
					r := rw.r
					h := sessionHeaders(sid, v)
					switch {
					case rw.noSession:
						delete(h, HeaderSessionID)
					case rw.badSession:
						h[HeaderSessionID] = "0123456789abcdef0123456789abcdef"
					}
					for k, val := range r.headers {
						h[k] = val
					}
					r.headers = h
					resp := ts.do(r)
					var body string
					if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
						// A reply stream ends after the reply: read it all.
						body = bodyOf(resp)
						resp.Body.Close()
					} else {
						body = bodyOf(resp)
					}
					if resp.StatusCode != rw.status {
						t.Fatalf("status %d, want %d; body %s", resp.StatusCode, rw.status, body)
					}
					ct := resp.Header.Get("Content-Type")
					if rw.ctype != "" && !strings.HasPrefix(ct, rw.ctype) {
						t.Errorf("Content-Type %q, want %q", ct, rw.ctype)
					}
					if rw.status == 202 && body != "" {
						t.Errorf("202 with a body: %q", body)
					}
					if rw.body != "" && !strings.Contains(strings.ToLower(body), strings.ToLower(rw.body)) {
						t.Errorf("body %q does not contain %q", body, rw.body)
					}
					if rw.header != "" {
						name, val, _ := strings.Cut(rw.header, ": ")
						if got := resp.Header.Get(name); got != val {
							t.Errorf("header %s = %q, want %q", name, got, val)
						}
					}
					if rw.status >= 400 && rw.status != 405 && strings.HasPrefix(ct, "application/json") {
						// Errors carry a JSON-RPC error object (id null) that SDKs can report.
						var e struct {
							ID    any `json:"id"`
							Error struct {
								Code    int    `json:"code"`
								Message string `json:"message"`
							} `json:"error"`
						}
						if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error.Code == 0 || e.Error.Message == "" {
							t.Errorf("error body is not a JSON-RPC error: %q (%v)", body, err)
						}
					}
				})
			}
			// The session survived every row: a final ping still works.
			resp := ts.do(req{body: ping, headers: sessionHeaders(sid, v)})
			if resp.StatusCode != 200 {
				t.Fatalf("session broken by the table: %d %s", resp.StatusCode, bodyOf(resp))
			}
		})
	}
}

// TestInitializeSession checks what the initialize response carries: a session id of
// visible ASCII, unique per session, and the JSON reply.
func TestInitializeSession(t *testing.T) {
	ts := newTestServer(t, serverOpts{})
	seen := map[string]bool{}
	for i := 0; i < 50; i++ {
		id := ts.initialize("2025-06-18")
		if len(id) < 32 {
			t.Errorf("session id %q is short: want at least 128 bits", id)
		}
		for _, c := range []byte(id) {
			if c < 0x21 || c > 0x7e {
				t.Fatalf("session id %q has a byte outside visible ASCII", id)
			}
		}
		if seen[id] {
			t.Fatalf("session id %q issued twice", id)
		}
		seen[id] = true
	}
	if ts.Reg.Len() != 50 {
		t.Errorf("registry holds %d sessions, want 50", ts.Reg.Len())
	}
	// Initialize carries no version header; it is refused when the header is bogus.
	resp := ts.do(req{body: `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`, headers: map[string]string{HeaderProtocolVersion: "2030-01-01"}})
	if resp.StatusCode != 400 {
		t.Errorf("initialize with unsupported header: status %d, want 400", resp.StatusCode)
	}
	// A failed initialize (no session bound) carries no session id.
	resp = ts.do(req{body: `{"jsonrpc":"2.0","id":1,"method":"nope"}`})
	if resp.StatusCode != 400 || resp.Header.Get(HeaderSessionID) != "" {
		t.Errorf("sessionless non-initialize: status %d, session %q", resp.StatusCode, resp.Header.Get(HeaderSessionID))
	}
}

// TestDeleteEndsSession: DELETE ends the session; its id is then unknown (404), its
// streams end, and the handler hears of it once.
func TestDeleteEndsSession(t *testing.T) {
	ts := newTestServer(t, serverOpts{})
	sid := ts.initialize("2025-11-25")
	h := sessionHeaders(sid, "2025-11-25")
	stream := ts.do(req{method: "GET", headers: h})
	if stream.StatusCode != 200 {
		t.Fatalf("GET: %d", stream.StatusCode)
	}
	defer stream.Body.Close()
	rd := sse.NewReader(stream.Body, 0)
	readEvents(t, rd, 1) // priming

	resp := ts.do(req{method: "DELETE", headers: h})
	if resp.StatusCode != 200 {
		t.Fatalf("DELETE: %d %s", resp.StatusCode, bodyOf(resp))
	}
	// The GET stream ends.
	rest := readEvents(t, rd, -1)
	for _, e := range rest {
		if e.Data != "" {
			t.Errorf("event after DELETE: %+v", e)
		}
	}
	for _, r := range []req{{body: `{"jsonrpc":"2.0","id":1,"method":"ping"}`}, {method: "GET"}, {method: "DELETE"}} {
		r.headers = h
		if resp := ts.do(r); resp.StatusCode != 404 {
			t.Errorf("%s after DELETE: %d, want 404", r.method, resp.StatusCode)
		}
	}
	ts.h.checkClosedOnly(t, sid)
}

// TestStandaloneStreamHeaders: the GET stream of each revision sends its headers at
// once, starts with a priming event and retry from 2025-11-25 on, and delivers what the
// session sends.
func TestStandaloneStreamHeaders(t *testing.T) {
	for _, v := range []string{"2025-03-26", "2025-06-18", "2025-11-25"} {
		t.Run(v, func(t *testing.T) {
			ts := newTestServer(t, serverOpts{cfg: HTTPConfig{RetryMs: 1234}})
			sid := ts.initialize(v)
			h := sessionHeaders(sid, v)
			// The response (its headers) arrives before anything is sent on the stream:
			// do returns only once the headers are in.
			stream := ts.do(req{method: "GET", headers: h})
			defer stream.Body.Close()
			if stream.StatusCode != 200 {
				t.Fatalf("GET: %d", stream.StatusCode)
			}
			for name, want := range map[string]string{"Content-Type": "text/event-stream", "X-Accel-Buffering": "no", "Cache-Control": "no-cache"} {
				if got := stream.Header.Get(name); got != want {
					t.Errorf("%s = %q, want %q", name, got, want)
				}
			}
			resp := ts.do(req{body: `{"jsonrpc":"2.0","id":2,"method":"broadcast","params":{"count":2}}`, headers: h})
			if resp.StatusCode != 200 {
				t.Fatalf("broadcast: %d", resp.StatusCode)
			}
			rd := sse.NewReader(stream.Body, 0)
			want := 2
			if v >= "2025-11-25" {
				want = 3
			}
			evs := readEvents(t, rd, want)
			if v >= "2025-11-25" {
				if evs[0].ID != "0-0" || evs[0].Data != "" || evs[0].Retry != 1234 {
					t.Errorf("priming event %+v, want id 0-0, empty data, retry 1234", evs[0])
				}
				evs = evs[1:]
			}
			for i, e := range evs {
				if want := "0-" + string(rune('1'+i)); e.ID != want {
					t.Errorf("event %d id %q, want %q", i, e.ID, want)
				}
				if !strings.Contains(e.Data, `"progress":`+string(rune('0'+i))) {
					t.Errorf("event %d data %q", i, e.Data)
				}
			}
		})
	}
}

// TestProtocolVersionHeader: an absent MCP-Protocol-Version means 2025-03-26 before a
// session exists and the negotiated revision after; a supported value is taken as is.
func TestProtocolVersionHeader(t *testing.T) {
	ts := newTestServer(t, serverOpts{})
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}`
	if body := bodyOf(ts.do(req{body: init})); !strings.Contains(body, `"transportVersion":"2025-03-26"`) {
		t.Errorf("no header: %s, want 2025-03-26", body)
	}
	if body := bodyOf(ts.do(req{body: init, headers: map[string]string{HeaderProtocolVersion: "2025-11-25"}})); !strings.Contains(body, `"transportVersion":"2025-11-25"`) {
		t.Errorf("header 2025-11-25: %s", body)
	}
}

// TestKeepAlive: an idle stream carries keep-alive comments, which clients ignore.
func TestKeepAlive(t *testing.T) {
	ts := newTestServer(t, serverOpts{cfg: HTTPConfig{KeepAlive: 5 * time.Millisecond}})
	sid := ts.initialize("2025-06-18")
	get := ts.do(req{method: "GET", headers: sessionHeaders(sid, "2025-06-18")})
	defer get.Body.Close()
	var seen []byte
	buf := make([]byte, 512)
	for !bytes.Contains(seen, []byte("\n: keep-alive\n\n")) {
		n, err := get.Body.Read(buf)
		if err != nil {
			t.Fatalf("stream ended before a keep-alive: %v (%q)", err, seen)
		}
		seen = append(seen, buf[:n]...)
	}
}
