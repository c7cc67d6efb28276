package main

// End-to-end tests of client authentication: mcprouter runs as a real process in front
// of the reference backend, with static bearer tokens or with JWT access tokens of a real
// OpenID provider on loopback (transport/auth/authtest); the Go SDK and mcp-go clients
// connect with tokens, and raw HTTP checks what a client without valid credentials, or
// with another principal's session, is told.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	mcpgoclient "github.com/mark3labs/mcp-go/client"
	mcpgotransport "github.com/mark3labs/mcp-go/client/transport"
	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/mcprouter/mcprouter/cmd/mcpbackend/mcpbackendtest"
	backendsrv "github.com/mcprouter/mcprouter/cmd/mcpbackend/server"
	"github.com/mcprouter/mcprouter/internal/testbin"
	"github.com/mcprouter/mcprouter/transport/auth/authtest"
)

// The static tokens of the bearer router: alice and bob hold the scope every request
// needs (mcp), carol does not.
const (
	aliceToken = "alice-e2e-token-4f7c"
	bobToken   = "bob-e2e-token-9a21"
	carolToken = "carol-e2e-token-0d3e"
)

// requiredScope is the scope every request to the routers of these tests needs.
const requiredScope = "mcp"

// authRouter is a router process that authenticates its clients.
type authRouter struct {
	*routerProc
	resource string             // its canonical URI: http://<addr>/mcp
	op       *authtest.Provider // the OpenID provider (jwt); nil for bearer
}

// token is a valid access token of subject for the router (jwt), or subject's static
// token (bearer: "alice", "bob", "carol").
func (r *authRouter) token(subject string) string {
	if r.op == nil {
		return map[string]string{"alice": aliceToken, "bob": bobToken, "carol": carolToken}[subject]
	}
	return r.op.Token(r.claims(subject))
}

// claims are the claims of a valid token of subject for the router.
func (r *authRouter) claims(subject string) authtest.Claims {
	return authtest.Claims{Subject: subject, Audience: []string{r.resource}, Scopes: []string{requiredScope}}
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// startAuthRouter starts a router in front of the reference backend (in-process) with
// auth.mode mode (bearer or jwt; jwt also starts the OpenID provider) and extra
// configuration appended to its auth section.
func startAuthRouter(t *testing.T, mode string) *authRouter {
	t.Helper()
	be := mcpbackendtest.Start(t, backendsrv.Config{Name: "ref", Tick: -1})
	addr := testbin.FreeAddr(t)
	r := &authRouter{resource: "http://" + addr + "/mcp"}
	var authYAML string
	switch mode {
	case "bearer":
		authYAML = fmt.Sprintf(`  bearer_tokens:
    - {principal: alice, sha256: %q, scopes: [mcp]}
    - {principal: bob, sha256: %q, scopes: [mcp]}
    - {principal: carol, sha256: %q}
`, sha256Hex(aliceToken), sha256Hex(bobToken), sha256Hex(carolToken))
	case "jwt":
		r.op = authtest.Start(t, authtest.Options{})
		authYAML = fmt.Sprintf("  issuer: %s\n", r.op.Issuer)
	default:
		t.Fatalf("mode %q", mode)
	}
	// The admin listener on a port of its own: the default one is fixed when the MCP
	// listener's port is.
	cfg := fmt.Sprintf(`admin: {listen: "127.0.0.1:0"}
backends:
  - {name: ref, url: %q}
auth:
  mode: %s
  resource: %s
  required_scopes: [%s]
%s`, be.URL(), mode, r.resource, requiredScope, authYAML)
	r.routerProc = startRouter(t, "--config", writeConfig(t, cfg), "--listen", addr)
	return r
}

// aliceBobAuth is the auth section of a router listening at addr that knows alice and
// bob by their static tokens, each holding the scope every request needs.
func aliceBobAuth(addr string) string {
	return fmt.Sprintf(`auth:
  mode: bearer
  resource: http://%[1]s/mcp
  required_scopes: [%[2]s]
  bearer_tokens:
    - {principal: alice, sha256: %[3]q, scopes: [%[2]s]}
    - {principal: bob, sha256: %[4]q, scopes: [%[2]s]}
`, addr, requiredScope, sha256Hex(aliceToken), sha256Hex(bobToken))
}

// startAliceBobRouter starts a stateless router that knows alice and bob (aliceBobAuth)
// in front of the one backend at backend, named b without a prefix (entry: more lines
// of its entry), with its admin listener on a port of its own.
func startAliceBobRouter(t *testing.T, backend, entry string) *routerProc {
	t.Helper()
	addr := testbin.FreeAddr(t)
	cfg := fmt.Sprintf("stateless: on\nadmin: {listen: \"127.0.0.1:0\"}\nbackends:\n  - name: b\n    prefix: \"\"\n%s    url: http://%s/mcp\n", entry, backend)
	return startRouter(t, "--config", writeConfig(t, cfg+aliceBobAuth(addr)), "--listen", addr)
}

// authClient is an HTTP client that presents token (none when "").
func authClient(token string) *http.Client {
	return &http.Client{Timeout: testTimeout, Transport: &bearerTransport{token: token, base: http.DefaultTransport}}
}

// bearerTransport adds an Authorization header to every request.
type bearerTransport struct {
	token string
	base  http.RoundTripper
}

func (b *bearerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if b.token == "" {
		return b.base.RoundTrip(req)
	}
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(req)
}

// exchange sends one request with token (none when "") and returns the response with
// its body read.
func exchange(t *testing.T, method, url, token string, headers map[string]string, body string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := authClient(token).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	return resp, string(b)
}

// bearerChallenge parses a response's WWW-Authenticate header as an MCP client does
// (the Go SDK's parser) and returns the Bearer challenge's parameters.
func bearerChallenge(t *testing.T, resp *http.Response) map[string]string {
	t.Helper()
	chs, err := oauthex.ParseWWWAuthenticate(resp.Header.Values("WWW-Authenticate"))
	if err != nil {
		t.Fatalf("WWW-Authenticate %q: %v", resp.Header.Values("WWW-Authenticate"), err)
	}
	for _, c := range chs {
		if c.Scheme == "bearer" {
			return c.Params
		}
	}
	t.Fatalf("no Bearer challenge in %q", resp.Header.Values("WWW-Authenticate"))
	return nil
}

const initRequest = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"auth-e2e","version":"1"}}}`

// TestAuthChallengeAndMetadata: a request without a token gets 401 with a Bearer
// challenge naming the metadata and the scope; the metadata document, at the
// path-inserted well-known URI and at the root, is what an MCP client (the Go SDK's
// oauthex) accepts, and readable from any web origin.
func TestAuthChallengeAndMetadata(t *testing.T) {
	r := startAuthRouter(t, "jwt")
	resp, body := exchange(t, "POST", r.url("/mcp"), "", nil, initRequest)
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("no token: %d %s", resp.StatusCode, body)
	}
	ch := bearerChallenge(t, resp)
	wantMeta := "http://" + r.Addr() + "/.well-known/oauth-protected-resource/mcp"
	if ch["resource_metadata"] != wantMeta || ch["scope"] != requiredScope || ch["error"] != "" {
		t.Errorf("challenge %v, want resource_metadata %s, scope %s and no error", ch, wantMeta, requiredScope)
	}
	var rpc struct {
		ID    *int               `json:"id"`
		Error struct{ Code int } `json:"error"`
	}
	if json.Unmarshal([]byte(body), &rpc) != nil || rpc.ID != nil || rpc.Error.Code == 0 {
		t.Errorf("body %s, want a JSON-RPC error with id null", body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	for _, u := range []string{ch["resource_metadata"], "http://" + r.Addr() + "/.well-known/oauth-protected-resource"} {
		meta, err := oauthex.GetProtectedResourceMetadata(ctx, u, r.resource, http.DefaultClient)
		if err != nil {
			t.Fatalf("metadata at %s: %v", u, err)
		}
		if !slices.Equal(meta.AuthorizationServers, []string{r.op.Issuer}) || !slices.Equal(meta.ScopesSupported, []string{requiredScope}) ||
			!slices.Equal(meta.BearerMethodsSupported, []string{"header"}) {
			t.Errorf("metadata at %s: %+v", u, meta)
		}
		resp, _ := exchange(t, "GET", u, "", map[string]string{"Origin": "https://app.example"}, "")
		if resp.Header.Get("Access-Control-Allow-Origin") != "*" || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
			t.Errorf("metadata at %s: CORS %q, content type %q", u, resp.Header.Get("Access-Control-Allow-Origin"), resp.Header.Get("Content-Type"))
		}
		resp, _ = exchange(t, "OPTIONS", u, "", map[string]string{"Origin": "https://app.example", "Access-Control-Request-Method": "GET"}, "")
		if resp.StatusCode/100 != 2 || resp.Header.Get("Access-Control-Allow-Origin") != "*" {
			t.Errorf("preflight of %s: %d, CORS %q", u, resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"))
		}
	}
}

// TestAuthRefusedTokens: every kind of bad JWT gets 401 invalid_token, a token without
// the required scope 403 insufficient_scope naming it, a token in the query string is
// refused; each refusal is one audit line with its reason and is counted in the admin's
// metrics, and no token reaches the log.
func TestAuthRefusedTokens(t *testing.T) {
	r := startAuthRouter(t, "jwt")
	op, c := r.op, r.claims("alice")
	noScope := c
	noScope.Scopes = []string{"other"}
	cases := []struct {
		name, token, reason string
		status              int
		errorCode           string
	}{
		{"expired", op.Expired(c), "expired", 401, "invalid_token"},
		{"not yet valid", op.NotYetValid(c), "not_yet_valid", 401, "invalid_token"},
		{"wrong issuer", op.WrongIssuer(c), "wrong_issuer", 401, "invalid_token"},
		{"wrong audience", op.WrongAudience(c), "wrong_audience", 401, "invalid_token"},
		{"alg none", op.Unsigned(c), "unsigned", 401, "invalid_token"},
		{"tampered", op.Tampered(c), "bad_signature", 401, "invalid_token"},
		{"unknown key", op.UnknownKey(c), "bad_signature", 401, "invalid_token"},
		{"HMAC with the public key", op.HMACWithPublicKey(c), "bad_algorithm", 401, "invalid_token"},
		{"insufficient scope", op.Token(noScope), "insufficient_scope", 403, "insufficient_scope"},
	}
	var tokens []string
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tokens = append(tokens, tc.token)
			resp, body := exchange(t, "POST", r.url("/mcp"), tc.token, nil, initRequest)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, body)
			}
			ch := bearerChallenge(t, resp)
			if ch["error"] != tc.errorCode || !strings.Contains(ch["resource_metadata"], "/.well-known/oauth-protected-resource") {
				t.Errorf("challenge %v, want error %s", ch, tc.errorCode)
			}
			if tc.status == 403 && ch["scope"] != requiredScope {
				t.Errorf("challenge %v, want scope %s", ch, requiredScope)
			}
			if !strings.Contains(body, `"reason":"`+tc.reason+`"`) || resp.Header.Get("Mcp-Session-Id") != "" {
				t.Errorf("body %s (session %q), want reason %s and no session", body, resp.Header.Get("Mcp-Session-Id"), tc.reason)
			}
		})
	}
	good := r.token("alice")
	resp, body := exchange(t, "POST", r.url("/mcp?access_token="+good), good, nil, initRequest)
	if resp.StatusCode/100 != 4 || !strings.Contains(body, "token_in_query") || resp.Header.Get("Mcp-Session-Id") != "" {
		t.Errorf("token in the query: %d %s", resp.StatusCode, body)
	}
	if resp, body := exchange(t, "POST", r.url("/mcp"), good, nil, initRequest); resp.StatusCode != 200 || resp.Header.Get("Mcp-Session-Id") == "" {
		t.Fatalf("a good token: %d %s", resp.StatusCode, body)
	}

	// The audit lines and the metrics say what happened; the log holds no token.
	for _, tc := range cases {
		if !r.Log.Contains("reason=" + tc.reason) {
			t.Errorf("no audit line with reason=%s", tc.reason)
		}
	}
	if n := r.Log.Count("request refused"); n != len(cases)+1 {
		t.Errorf("%d audit lines, want %d", n, len(cases)+1)
	}
	for _, tok := range append(tokens, good) {
		if payload := strings.Split(tok, ".")[1]; r.Log.Contains(payload) {
			t.Errorf("a token reached the log:\n%s", r.Log)
			break
		}
	}
	admin := r.Log.Value("admin listening", "addr")
	if admin == "" {
		t.Fatalf("no admin listener in the log:\n%s", r.Log)
	}
	_, metrics := exchange(t, "GET", "http://"+admin+"/metrics", "", nil, "")
	for _, want := range []string{
		`mcprouter_auth_requests_total{outcome="refused",reason="expired"} 1`,
		`mcprouter_auth_requests_total{outcome="refused",reason="bad_signature"} 2`,
		`mcprouter_auth_requests_total{outcome="refused",reason="insufficient_scope"} 1`,
		`mcprouter_auth_requests_total{outcome="refused",reason="token_in_query"} 1`,
		`mcprouter_auth_requests_total{outcome="accepted",reason="ok"} 1`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

// TestAuthClients: the Go SDK (Streamable HTTP and legacy SSE) and mcp-go clients work
// with a static bearer token and with a JWT, and cannot connect without one.
func TestAuthClients(t *testing.T) {
	for _, mode := range []string{"bearer", "jwt"} {
		t.Run(mode, func(t *testing.T) {
			r := startAuthRouter(t, mode)
			token := r.token("alice")
			t.Run("go-sdk streamable", func(t *testing.T) {
				goSDKAuthSession(t, &mcp.StreamableClientTransport{Endpoint: r.url("/mcp"), HTTPClient: authClient(token), MaxRetries: -1})
			})
			t.Run("go-sdk sse", func(t *testing.T) {
				goSDKAuthSession(t, &mcp.SSEClientTransport{Endpoint: r.url("/sse"), HTTPClient: authClient(token)})
			})
			t.Run("go-sdk without a token", func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
				defer cancel()
				cs, err := goSDKClient().Connect(ctx, &mcp.StreamableClientTransport{Endpoint: r.url("/mcp"), MaxRetries: -1}, nil)
				if err == nil {
					cs.Close()
					t.Fatal("connected without a token")
				}
				if !strings.Contains(err.Error(), "401") && !strings.Contains(strings.ToLower(err.Error()), "unauthorized") {
					t.Errorf("error %v does not say unauthorized", err)
				}
			})
			t.Run("mcp-go streamable", func(t *testing.T) {
				c, err := mcpgoclient.NewStreamableHttpClient(r.url("/mcp"), mcpgotransport.WithHTTPTimeout(testTimeout),
					mcpgotransport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + token}))
				if err != nil {
					t.Fatal(err)
				}
				mcpgoAuthSession(t, c)
			})
			t.Run("mcp-go sse", func(t *testing.T) {
				c, err := mcpgoclient.NewSSEMCPClient(r.url("/sse"), mcpgotransport.WithHeaders(map[string]string{"Authorization": "Bearer " + token}))
				if err != nil {
					t.Fatal(err)
				}
				mcpgoAuthSession(t, c)
			})
			t.Run("mcp-go without a token", func(t *testing.T) {
				c, err := mcpgoclient.NewStreamableHttpClient(r.url("/mcp"), mcpgotransport.WithHTTPTimeout(testTimeout))
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
				defer cancel()
				req := mcpgo.InitializeRequest{}
				req.Params.ProtocolVersion = "2025-06-18"
				if _, err := c.Initialize(ctx, req); err == nil {
					t.Fatal("initialized without a token")
				}
			})
		})
	}
}

// goSDKAuthSession connects (at the SDK's latest revision, stateless 2026-07-28 on
// Streamable HTTP, which has no ping), lists the tools, calls the backend's echo and
// closes.
func goSDKAuthSession(t *testing.T, tr mcp.Transport) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	cs, err := goSDKClient().Connect(ctx, tr, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer cs.Close()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	echo := ""
	for _, tool := range tools.Tools {
		if strings.HasSuffix(tool.Name, "echo") {
			echo = tool.Name
		}
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: echo, Arguments: map[string]any{"text": "authenticated"}})
	if err != nil || res.IsError || len(res.Content) == 0 {
		t.Fatalf("tools/call %s: %v %+v", echo, err, res)
	}
	if tc, ok := res.Content[0].(*mcp.TextContent); !ok || tc.Text != "authenticated" {
		t.Errorf("echo said %+v", res.Content[0])
	}
}

// mcpgoAuthSession starts and initializes an mcp-go client, calls echo and pings.
func mcpgoAuthSession(t *testing.T, c *mcpgoclient.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	defer c.Close()
	startMCPGo(t, ctx, c, "2025-06-18", "auth-e2e-mcp-go")
	tools, err := c.ListTools(ctx, mcpgo.ListToolsRequest{})
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	call := mcpgo.CallToolRequest{}
	for _, tool := range tools.Tools {
		if strings.HasSuffix(tool.Name, "echo") {
			call.Params.Name = tool.Name
		}
	}
	call.Params.Arguments = map[string]any{"text": "authenticated"}
	res, err := c.CallTool(ctx, call)
	if err != nil || res.IsError || len(res.Content) == 0 {
		t.Fatalf("tools/call %s: %v %+v", call.Params.Name, err, res)
	}
	if tc, ok := res.Content[0].(mcpgo.TextContent); !ok || tc.Text != "authenticated" {
		t.Errorf("echo said %+v", res.Content[0])
	}
	if err := c.Ping(ctx); err != nil {
		t.Fatalf("ping: %v", err)
	}
}

// TestAuthSessionOwner: a session belongs to the principal that opened it. Bob, holding
// a valid token and alice's session id, gets for his POST, GET, resumed GET
// (Last-Event-ID) and DELETE exactly the answer of a session that does not exist, on
// Streamable HTTP and on the legacy endpoints; alice's session carries on.
func TestAuthSessionOwner(t *testing.T) {
	r := startAuthRouter(t, "jwt")
	alice, bob := r.token("alice"), r.token("bob")
	resp, body := exchange(t, "POST", r.url("/mcp"), alice, nil, initRequest)
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != 200 || sid == "" {
		t.Fatalf("alice's initialize: %d %s", resp.StatusCode, body)
	}
	onSession := func(id string, more ...string) map[string]string {
		h := map[string]string{"Mcp-Session-Id": id, "MCP-Protocol-Version": "2025-11-25"}
		for i := 0; i+1 < len(more); i += 2 {
			h[more[i]] = more[i+1]
		}
		return h
	}
	exchange(t, "POST", r.url("/mcp"), alice, onSession(sid), `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	// A reply stream to resume: alice's ping answered as an event stream has an event id.
	resp, body = exchange(t, "POST", r.url("/mcp"), alice, onSession(sid, "Accept", "text/event-stream"), `{"jsonrpc":"2.0","id":2,"method":"ping"}`)
	lastID := ""
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, "id:"); ok {
			lastID = strings.TrimSpace(v)
		}
	}
	if resp.StatusCode != 200 || lastID == "" {
		t.Fatalf("alice's ping as a stream: %d %q", resp.StatusCode, body)
	}

	const unknownSID = "0123456789abcdef0123456789abcdef"
	unknownResp, unknown := exchange(t, "POST", r.url("/mcp"), bob, onSession(unknownSID), `{"jsonrpc":"2.0","id":3,"method":"ping"}`)
	if unknownResp.StatusCode != 404 {
		t.Fatalf("an unknown session: %d %s", unknownResp.StatusCode, unknown)
	}
	for _, c := range []struct {
		name, method, body string
		headers            map[string]string
	}{
		{"POST", "POST", `{"jsonrpc":"2.0","id":3,"method":"ping"}`, onSession(sid)},
		{"GET", "GET", "", onSession(sid, "Accept", "text/event-stream")},
		{"resumed GET", "GET", "", onSession(sid, "Accept", "text/event-stream", "Last-Event-ID", lastID)},
		{"DELETE", "DELETE", "", onSession(sid)},
	} {
		resp, body := exchange(t, c.method, r.url("/mcp"), bob, c.headers, c.body)
		if resp.StatusCode != 404 || body != unknown {
			t.Errorf("bob's %s on alice's session: %d %s, want 404 %s", c.name, resp.StatusCode, body, unknown)
		}
	}
	if resp, body := exchange(t, "POST", r.url("/mcp"), alice, onSession(sid), `{"jsonrpc":"2.0","id":4,"method":"ping"}`); resp.StatusCode != 200 {
		t.Errorf("alice's ping after bob's tries: %d %s", resp.StatusCode, body)
	}
	if n := r.Log.Count("reason=foreign_session"); n != 4 {
		t.Errorf("%d audit lines of bob's tries, want 4", n)
	}

	// Legacy HTTP+SSE: the session opened by alice's GET /sse is hers.
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", r.url("/sse"), nil)
	req.Header.Set("Accept", "text/event-stream")
	stream, err := authClient(alice).Do(req)
	if err != nil || stream.StatusCode != 200 {
		t.Fatalf("alice's GET /sse: %v %v", err, stream)
	}
	defer stream.Body.Close()
	endpoint := ""
	buf := make([]byte, 4096)
	for endpoint == "" {
		n, err := stream.Body.Read(buf)
		if err != nil {
			t.Fatalf("reading the endpoint event: %v", err)
		}
		for _, line := range strings.Split(string(buf[:n]), "\n") {
			if v, ok := strings.CutPrefix(line, "data:"); ok {
				endpoint = strings.TrimSpace(v)
			}
		}
	}
	ping := `{"jsonrpc":"2.0","id":5,"method":"ping"}`
	_, unknownLegacy := exchange(t, "POST", r.url("/message?sessionId="+unknownSID), bob, nil, ping)
	if resp, body := exchange(t, "POST", r.url(endpoint), bob, nil, ping); resp.StatusCode != 404 || body != unknownLegacy {
		t.Errorf("bob's POST to alice's legacy session: %d %s, want 404 %s", resp.StatusCode, body, unknownLegacy)
	}
	if resp, body := exchange(t, "POST", r.url(endpoint), alice, nil, ping); resp.StatusCode != 202 {
		t.Errorf("alice's POST to her legacy session: %d %s", resp.StatusCode, body)
	}
}

// TestAuthKeyRotation: the OpenID provider rotates its signing key in the middle of a
// session. A token signed by the new key is accepted at once (the router fetches the
// keys when it meets an unknown key id) and carries on alice's session; after a rotation
// that drops the old keys (a compromised key), tokens they signed are refused, and
// tokens of another algorithm (ES256) from the new key work.
func TestAuthKeyRotation(t *testing.T) {
	r := startAuthRouter(t, "jwt")
	first := r.token("alice")
	resp, body := exchange(t, "POST", r.url("/mcp"), first, nil, initRequest)
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != 200 || sid == "" {
		t.Fatalf("initialize: %d %s", resp.StatusCode, body)
	}
	ping := func(token string) (int, string) {
		resp, body := exchange(t, "POST", r.url("/mcp"), token, map[string]string{"Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"},
			`{"jsonrpc":"2.0","id":2,"method":"ping"}`)
		return resp.StatusCode, body
	}
	r.op.Rotate(authtest.RotateOptions{})
	if status, body := ping(r.token("alice")); status != 200 {
		t.Fatalf("a token of the new key: %d %s", status, body)
	}
	if status, body := ping(first); status != 200 {
		t.Fatalf("a token of the old key, still published: %d %s", status, body)
	}
	r.op.Rotate(authtest.RotateOptions{Algorithm: "ES256", DropOld: true})
	if status, body := ping(r.token("alice")); status != 200 {
		t.Fatalf("an ES256 token of the key that replaced the others: %d %s", status, body)
	}
	if status, body := ping(first); status != 401 || !strings.Contains(body, "bad_signature") {
		t.Errorf("a token of a dropped key: %d %s", status, body)
	}
	if status, body := ping(r.token("bob")); status != 404 {
		t.Errorf("bob, with a token of the new key, on alice's session: %d %s", status, body)
	}
}
