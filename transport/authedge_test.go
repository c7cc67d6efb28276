package transport

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/mcprouter/mcprouter/internal/testio"
	"github.com/mcprouter/mcprouter/transport/auth"
	"github.com/mcprouter/mcprouter/transport/sse"
)

// Static bearer tokens of the edge tests: two principals.
const (
	aliceToken = "alice-secret-token"
	bobToken   = "bob-secret-token"
)

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// newAuthServer is a test server whose requests must carry alice's or bob's token; its
// audit lines go to the returned buffer.
func newAuthServer(t *testing.T, o serverOpts) (*testServer, *testio.Buffer) {
	t.Helper()
	cfg := auth.Config{Mode: auth.ModeBearer, Resource: "http://127.0.0.1/mcp",
		BearerTokens: []auth.BearerToken{{Principal: "alice", SHA256: sha256Hex(aliceToken)}, {Principal: "bob", SHA256: sha256Hex(bobToken)}}}
	logs := &testio.Buffer{}
	o.cfg.Auth = newAuth(t, cfg)
	o.cfg.Audit = slog.New(slog.NewTextHandler(logs, nil))
	return newTestServer(t, o), logs
}

// newAuth is the authenticator of cfg, defaulted and validated as the router's
// configuration does, closed at the end of the test.
func newAuth(t *testing.T, cfg auth.Config) *auth.Authenticator {
	t.Helper()
	cfg.Defaults()
	if err := cfg.Validate(true); err != nil {
		t.Fatal(err)
	}
	a, err := auth.New(context.Background(), cfg, auth.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	return a
}

// as adds the Authorization header of token to h (a copy).
func as(token string, h map[string]string) map[string]string {
	out := map[string]string{"Authorization": "Bearer " + token}
	for k, v := range h {
		out[k] = v
	}
	return out
}

// initializeAs opens a session with token and returns its id.
func (ts *testServer) initializeAs(token, v string) string {
	ts.t.Helper()
	resp := ts.do(req{body: `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"` + v + `"}}`, headers: as(token, nil)})
	if resp.StatusCode != http.StatusOK || resp.Header.Get(HeaderSessionID) == "" {
		ts.t.Fatalf("initialize: status %d: %s", resp.StatusCode, bodyOf(resp))
	}
	return resp.Header.Get(HeaderSessionID)
}

// refusal is what a refused request's JSON-RPC error body says.
type refusal struct {
	ID    json.RawMessage `json:"id"`
	Error struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Data    struct {
			Reason string `json:"reason"`
		} `json:"data"`
	} `json:"error"`
}

func refusalOf(t *testing.T, resp *http.Response) refusal {
	t.Helper()
	var r refusal
	if err := json.Unmarshal([]byte(bodyOf(resp)), &r); err != nil {
		t.Fatalf("body %q is not a JSON-RPC error: %v", bodyOf(resp), err)
	}
	return r
}

// TestAuthEdgeRefuses: every endpoint and method refuses a request without valid
// credentials with 401, the challenge and a JSON-RPC error naming the reason, before
// the handler sees anything or a session is created; a token in the query string is
// refused even with a valid header.
func TestAuthEdgeRefuses(t *testing.T) {
	ts, logs := newAuthServer(t, serverOpts{})
	ping := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	initBody := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`
	for _, c := range []struct {
		name   string
		r      req
		reason auth.Reason
	}{
		{"POST without a token", req{body: initBody}, auth.ReasonMissing},
		{"POST with an unknown token", req{body: initBody, headers: as("nobody", nil)}, auth.ReasonUnknownToken},
		{"POST with basic credentials", req{body: initBody, headers: map[string]string{"Authorization": "Basic YWxpY2U6eA=="}}, auth.ReasonMalformed},
		{"GET without a token", req{method: "GET", headers: map[string]string{"Accept": "text/event-stream", HeaderSessionID: "x"}}, auth.ReasonMissing},
		{"DELETE without a token", req{method: "DELETE", headers: map[string]string{HeaderSessionID: "x"}}, auth.ReasonMissing},
		{"legacy GET without a token", req{method: "GET", path: "/sse", headers: map[string]string{"Accept": "text/event-stream"}}, auth.ReasonMissing},
		{"legacy POST without a token", req{path: "/message?sessionId=x", body: ping}, auth.ReasonMissing},
		{"token in the query", req{path: "/mcp?access_token=" + aliceToken, body: initBody, headers: as(aliceToken, nil)}, auth.ReasonTokenInQuery},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp := ts.do(c.r)
			if resp.StatusCode < 400 || resp.StatusCode >= 500 {
				t.Fatalf("status %d, want a 4xx: %s", resp.StatusCode, bodyOf(resp))
			}
			if c.reason != auth.ReasonTokenInQuery && resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("status %d, want 401", resp.StatusCode)
			}
			ch := resp.Header.Get("WWW-Authenticate")
			if !strings.HasPrefix(ch, "Bearer ") || !strings.Contains(ch, `resource_metadata="http://127.0.0.1/.well-known/oauth-protected-resource/mcp"`) {
				t.Errorf("WWW-Authenticate %q, want a Bearer challenge naming the metadata", ch)
			}
			// RFC 6750 3.1: no error code for a request without a bearer token (none,
			// or another scheme); invalid_token for a token that does not pass.
			if c.reason == auth.ReasonUnknownToken && !strings.Contains(ch, `error="invalid_token"`) {
				t.Errorf("WWW-Authenticate %q, want error=\"invalid_token\"", ch)
			}
			if r := refusalOf(t, resp); string(r.ID) != "null" || r.Error.Code == 0 || auth.Reason(r.Error.Data.Reason) != c.reason {
				t.Errorf("body %s, want an error with id null and reason %s", bodyOf(resp), c.reason)
			}
		})
	}
	ts.h.mu.Lock()
	seen := ts.h.seen
	ts.h.mu.Unlock()
	if len(seen) != 0 || ts.Reg.Len() != 0 {
		t.Errorf("refused requests reached the handler (%v) or opened sessions (%d)", seen, ts.Reg.Len())
	}
	log := logs.String()
	if strings.Count(log, "request refused") < 8 || !strings.Contains(log, "principal=anonymous") ||
		!strings.Contains(log, "reason=missing") || !strings.Contains(log, "path=/sse") || !strings.Contains(log, "remote=") {
		t.Errorf("audit log lacks a line per refusal with principal, reason, remote address and path:\n%s", log)
	}
	if strings.Contains(log, aliceToken) || strings.Contains(log, "access_token") || strings.Contains(log, "nobody") {
		t.Errorf("a token reached the audit log:\n%s", log)
	}
	if st := ts.HTTP.cfg.Auth.Stats(); st[auth.ReasonMissing] < 5 || st[auth.ReasonTokenInQuery] != 1 {
		t.Errorf("auth stats %v", st)
	}
}

// TestAuthEdgeSessionOwner: a session belongs to the principal that opened it. Another
// principal's POST, GET, resumption (Last-Event-ID) and DELETE on it get exactly the
// answer of an unknown session, and the session carries on for its owner.
func TestAuthEdgeSessionOwner(t *testing.T) {
	ts, logs := newAuthServer(t, serverOpts{})
	const v = "2025-11-25"
	sid := ts.initializeAs(aliceToken, v)
	sess, ok := ts.Reg.Get([]byte(sid))
	if !ok || sess.Principal() == nil || sess.Principal().Subject != "alice" {
		t.Fatalf("session principal %v, want alice", sess.Principal())
	}
	unknown := ts.do(req{body: `{"jsonrpc":"2.0","id":2,"method":"ping"}`, headers: as(bobToken, sessionHeaders("0123456789abcdef0123456789abcdef", v))})
	if unknown.StatusCode != http.StatusNotFound {
		t.Fatalf("unknown session: %d", unknown.StatusCode)
	}
	// A primed GET stream gives an event id to resume from.
	get := ts.do(req{method: "GET", headers: as(aliceToken, merge(sessionHeaders(sid, v), "Accept", "text/event-stream"))})
	if get.StatusCode != http.StatusOK {
		t.Fatalf("alice's GET: %d %s", get.StatusCode, bodyOf(get))
	}
	primed := readEvents(t, sse.NewReader(get.Body, 0), 1)
	get.Body.Close()

	for _, c := range []struct {
		name string
		r    req
	}{
		{"POST", req{body: `{"jsonrpc":"2.0","id":2,"method":"ping"}`, headers: as(bobToken, sessionHeaders(sid, v))}},
		{"GET", req{method: "GET", headers: as(bobToken, merge(sessionHeaders(sid, v), "Accept", "text/event-stream"))}},
		{"resumed GET", req{method: "GET", headers: as(bobToken, merge(sessionHeaders(sid, v), "Accept", "text/event-stream", HeaderLastEventID, primed[0].ID))}},
		{"DELETE", req{method: "DELETE", headers: as(bobToken, sessionHeaders(sid, v))}},
	} {
		resp := ts.do(c.r)
		if resp.StatusCode != http.StatusNotFound || bodyOf(resp) != bodyOf(unknown) {
			t.Errorf("bob's %s on alice's session: %d %s, want the unknown session's 404 %s", c.name, resp.StatusCode, bodyOf(resp), bodyOf(unknown))
		}
	}
	if sess.Closed() {
		t.Fatal("bob's DELETE ended alice's session")
	}
	if resp := ts.do(req{body: `{"jsonrpc":"2.0","id":3,"method":"ping"}`, headers: as(aliceToken, sessionHeaders(sid, v))}); resp.StatusCode != http.StatusOK {
		t.Errorf("alice's ping after bob's tries: %d %s", resp.StatusCode, bodyOf(resp))
	}
	if n := ts.HTTP.Stats.ForeignSessions.Load(); n != 4 {
		t.Errorf("ForeignSessions = %d, want 4", n)
	}
	if log := logs.String(); strings.Count(log, "reason="+ReasonForeignSession) != 4 || !strings.Contains(log, "principal=bob") {
		t.Errorf("audit log lacks bob's refusals:\n%s", log)
	}
	if resp := ts.do(req{method: "DELETE", headers: as(aliceToken, sessionHeaders(sid, v))}); resp.StatusCode != http.StatusOK || !sess.Closed() {
		t.Errorf("alice's DELETE: %d, closed %v", resp.StatusCode, sess.Closed())
	}
}

// TestAuthEdgeLegacyOwner: a legacy HTTP+SSE session belongs to the principal that
// opened its stream; another principal's POSTs to it are refused as for an unknown
// session.
func TestAuthEdgeLegacyOwner(t *testing.T) {
	ts, _ := newAuthServer(t, serverOpts{})
	stream := ts.do(req{method: "GET", path: "/sse", headers: as(aliceToken, map[string]string{"Accept": "text/event-stream"})})
	if stream.StatusCode != http.StatusOK {
		t.Fatalf("GET /sse: %d %s", stream.StatusCode, bodyOf(stream))
	}
	defer stream.Body.Close()
	rd := sse.NewReader(stream.Body, 0)
	ev := readEvents(t, rd, 1)[0]
	endpoint := ev.Data
	ping := `{"jsonrpc":"2.0","id":7,"method":"ping"}`
	unknown := ts.do(req{path: "/message?sessionId=0123456789abcdef0123456789abcdef", body: ping, headers: as(bobToken, nil)})
	if resp := ts.do(req{path: endpoint, body: ping, headers: as(bobToken, nil)}); resp.StatusCode != http.StatusNotFound || bodyOf(resp) != bodyOf(unknown) {
		t.Errorf("bob's POST to alice's legacy session: %d %s, want %d %s", resp.StatusCode, bodyOf(resp), unknown.StatusCode, bodyOf(unknown))
	}
	if resp := ts.do(req{path: endpoint, body: ping}); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("POST without a token: %d", resp.StatusCode)
	}
	if resp := ts.do(req{path: endpoint, body: ping, headers: as(aliceToken, nil)}); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("alice's POST: %d %s", resp.StatusCode, bodyOf(resp))
	}
	if got := readEvents(t, rd, 1)[0]; !strings.Contains(got.Data, `"id":7`) {
		t.Errorf("alice's reply %q", got.Data)
	}
}

// ownerResolver knows one moved session, owned by alice.
type ownerResolver struct {
	mu    sync.Mutex
	asked []string // principal IDs of ResolveSession calls
}

func (r *ownerResolver) ResolveSession(id string, p *auth.Principal) (string, SessionState, error) {
	r.mu.Lock()
	r.asked = append(r.asked, p.ID())
	r.mu.Unlock()
	switch {
	case id != movedSession:
		return "", nil, ErrNoSession
	case p.ID() != "alice":
		return "", nil, ErrForeignSession
	}
	return "2025-03-26", struct{}{}, nil
}

func (r *ownerResolver) SessionAdopted(*Session) {}

const movedSession = "0123456789abcdef0123456789abcdef"

// TestAuthEdgeAdoption: a session carried on from another instance is resolved for the
// requesting principal, so that another principal's request builds nothing and gets
// 404, and once adopted for its owner it stays its owner's.
func TestAuthEdgeAdoption(t *testing.T) {
	res := &ownerResolver{}
	ts, _ := newAuthServer(t, serverOpts{cfg: HTTPConfig{Resolver: res}})
	ping := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	if resp := ts.do(req{body: ping, headers: as(bobToken, sessionHeaders(movedSession, ""))}); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("bob adopting alice's session: %d %s", resp.StatusCode, bodyOf(resp))
	}
	if ts.Reg.Len() != 0 {
		t.Fatal("bob's request adopted alice's session")
	}
	if resp := ts.do(req{body: ping, headers: as(aliceToken, sessionHeaders(movedSession, ""))}); resp.StatusCode != http.StatusOK {
		t.Fatalf("alice adopting her session: %d %s", resp.StatusCode, bodyOf(resp))
	}
	if resp := ts.do(req{body: ping, headers: as(bobToken, sessionHeaders(movedSession, ""))}); resp.StatusCode != http.StatusNotFound {
		t.Errorf("bob on the adopted session: %d %s", resp.StatusCode, bodyOf(resp))
	}
	if n := ts.HTTP.Stats.ForeignSessions.Load(); n != 2 {
		t.Errorf("ForeignSessions = %d, want 2 (before and after the adoption)", n)
	}
	res.mu.Lock()
	defer res.mu.Unlock()
	if strings.Join(res.asked, ",") != "bob,alice" {
		t.Errorf("ResolveSession asked for %v, want bob then alice", res.asked)
	}
}

// TestAuthEdgeMetadata: the metadata document is served without credentials, readable
// from any origin, with its CORS preflight.
func TestAuthEdgeMetadata(t *testing.T) {
	ts, _ := newAuthServer(t, serverOpts{})
	paths := ts.HTTP.MetadataPaths("/mcp")
	if len(paths) < 2 || paths[0] != auth.WellKnownPath {
		t.Fatalf("MetadataPaths = %v", paths)
	}
	var ctx fasthttp.RequestCtx
	ctx.Request.Header.SetMethod("GET")
	ts.HTTP.ServeMetadata(&ctx)
	var doc struct {
		Resource string   `json:"resource"`
		Methods  []string `json:"bearer_methods_supported"`
	}
	if ctx.Response.StatusCode() != 200 || string(ctx.Response.Header.ContentType()) != "application/json" ||
		string(ctx.Response.Header.Peek("Access-Control-Allow-Origin")) != "*" || json.Unmarshal(ctx.Response.Body(), &doc) != nil ||
		doc.Resource != "http://127.0.0.1/mcp" || len(doc.Methods) == 0 {
		t.Errorf("GET: %d %q %s", ctx.Response.StatusCode(), ctx.Response.Header.ContentType(), ctx.Response.Body())
	}
	var pre fasthttp.RequestCtx
	pre.Request.Header.SetMethod("OPTIONS")
	ts.HTTP.ServeMetadata(&pre)
	if pre.Response.StatusCode() != 204 || string(pre.Response.Header.Peek("Access-Control-Allow-Origin")) != "*" ||
		!strings.Contains(string(pre.Response.Header.Peek("Access-Control-Allow-Methods")), "GET") {
		t.Errorf("OPTIONS: %d %s", pre.Response.StatusCode(), pre.Response.Header.String())
	}
	var post fasthttp.RequestCtx
	post.Request.Header.SetMethod("POST")
	ts.HTTP.ServeMetadata(&post)
	if post.Response.StatusCode() != 405 {
		t.Errorf("POST: %d", post.Response.StatusCode())
	}
	// Off: no paths, nothing to serve.
	if off := newTestServer(t, serverOpts{}); off.HTTP.MetadataPaths("/mcp") != nil {
		t.Error("metadata paths with authentication off")
	}
}
