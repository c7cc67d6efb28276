package app_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcprouter/mcprouter/cmd/mcprouter/app"
	"github.com/mcprouter/mcprouter/router/fleet"
	"github.com/mcprouter/mcprouter/transport/auth"
	"github.com/mcprouter/mcprouter/transport/auth/authtest"
	"github.com/mcprouter/mcprouter/transport/upstream"
)

// backendResource is the test backend's identifier at the OpenID provider.
const backendResource = "https://crm.internal/mcp"

// tokenBackend is an MCP backend (the official SDK's) behind a check that accepts only
// access tokens of op meant for it, verified by go-oidc. It records the subject of
// every request and every header value it saw.
type tokenBackend struct {
	mu       sync.Mutex
	subjects []string // "" for a refused request
	values   []string
}

// startTokenBackend starts the test OpenID provider, with the router registered as the
// client "router" (its secret in ROUTER_SECRET), and a tokenBackend that accepts that
// provider's tokens; it returns the backend's URL.
func startTokenBackend(t *testing.T) (*authtest.Provider, *tokenBackend, string) {
	t.Helper()
	op := authtest.Start(t, authtest.Options{})
	op.AddClient("router", "s3cret")
	t.Setenv("ROUTER_SECRET", "s3cret")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	disc, err := oidc.NewProvider(ctx, op.Issuer)
	if err != nil {
		t.Fatal(err)
	}
	v := disc.Verifier(&oidc.Config{ClientID: backendResource})
	srv := mcp.NewServer(&mcp.Implementation{Name: "crm", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "echo"}, func(_ context.Context, _ *mcp.CallToolRequest, in struct {
		Text string `json:"text"`
	}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
	})
	next := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{JSONResponse: true})
	b := &tokenBackend{}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sub := ""
		if tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
			if id, err := v.Verify(r.Context(), tok); err == nil {
				sub = id.Subject
			}
		}
		b.mu.Lock()
		b.subjects = append(b.subjects, sub)
		for _, vs := range r.Header {
			b.values = append(b.values, vs...)
		}
		b.mu.Unlock()
		if sub == "" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	return op, b, ts.URL
}

// dialAndCall opens an upstream session with d (ctx says for whom), initializes it and
// calls echo.
func dialAndCall(t *testing.T, ctx context.Context, d fleet.Dialer) {
	t.Helper()
	got := make(chan []byte, 4)
	conn, err := d.Dial(ctx, upstream.SinkFuncs{OnMessage: func(m []byte) { got <- append([]byte(nil), m...) }})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, msg := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`,
	} {
		if err := conn.Send(ctx, []byte(msg)); err != nil {
			t.Fatal(err)
		}
		select {
		case reply := <-got:
			if strings.Contains(string(reply), `"error"`) {
				t.Fatalf("reply %s", reply)
			}
		case <-ctx.Done():
			t.Fatal("no reply")
		}
		if strings.Contains(msg, "initialize") {
			conn.SetProtocolVersion("2025-06-18")
			if err := conn.Send(ctx, []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestBackendAuthDials: the dialers built from the configuration present, to a backend
// that accepts only tokens meant for it, the router's client credentials token on the
// router's own session and each client's exchanged token on that client's session;
// the client's own token never reaches the backend.
func TestBackendAuthDials(t *testing.T) {
	op, b, url := startTokenBackend(t)
	client := "{token_url: " + op.TokenURL() + ", client_id: router, client_secret_env: ROUTER_SECRET, resource: " + backendResource + "}"
	cfg, err := app.ParseConfig([]byte("auth: {mode: jwt, resource: \"http://127.0.0.1:8080/mcp\", issuer: \"" + op.Issuer + "\"}\n" +
		"backends:\n  - name: crm\n    url: " + url + "\n    sessions: per-client\n" +
		"    auth:\n      client_credentials: " + client + "\n      token_exchange: " + client + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	fc, err := app.FleetConfig(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	d := fc.Backends[0].Dialers[0]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	dialAndCall(t, ctx, d)
	alice := &auth.Principal{Subject: "alice", Issuer: op.Issuer,
		Token: op.Token(authtest.Claims{Subject: "alice", Audience: []string{"http://127.0.0.1:8080/mcp"}})}
	dialAndCall(t, upstream.WithClient(ctx, alice), d)

	b.mu.Lock()
	defer b.mu.Unlock()
	seen := map[string]int{}
	for _, s := range b.subjects {
		seen[s]++
	}
	if seen[""] != 0 || seen["router"] == 0 || seen["alice"] == 0 || len(seen) != 2 {
		t.Fatalf("subjects the backend saw: %v (want the router's session as router, alice's as alice)", seen)
	}
	for _, v := range b.values {
		if strings.Contains(v, alice.Token) {
			t.Fatal("the client's token reached the backend")
		}
	}
}

// bearerTransport adds a client's bearer token to every request.
type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// refusesCalls is an MCP backend whose tools/call is refused with 403, as a backend
// refuses a token without the scope a call needs.
func refusesCalls(t *testing.T) string {
	srv := mcp.NewServer(&mcp.Implementation{Name: "strict", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "echo"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{}, nil, nil
	})
	next := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{JSONResponse: true})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if strings.Contains(string(body), `"tools/call"`) {
			w.Header().Set("WWW-Authenticate", `Bearer error="insufficient_scope"`)
			http.Error(w, "insufficient scope", http.StatusForbidden)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		next.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	return ts.URL
}

// TestBackendCredentialsThroughRouter: a client authenticated at the router with its
// own token calls a tool of a backend that accepts only the router's client credentials
// token for it: the call goes through, and the backend never sees the client's token.
// A backend that refuses the router's credentials gives the client a JSON-RPC error
// that names it, not a challenge as if the client's credentials were at fault.
func TestBackendCredentialsThroughRouter(t *testing.T) {
	op, b, crmURL := startTokenBackend(t)
	const clientToken = "alice-token-4f1c2d"
	cfg, err := app.ParseConfig([]byte(fmt.Sprintf(`listen: 127.0.0.1:0
auth:
  mode: bearer
  resource: http://127.0.0.1:8080/mcp
  bearer_tokens: [{principal: alice, sha256: "%x"}]
backends:
  - name: crm
    url: %s
    auth:
      client_credentials: {token_url: %s, client_id: router, client_secret_env: ROUTER_SECRET, resource: %s}
  - name: strict
    url: %s
    auth: {headers: {X-Api-Key: not-enough}}
`, sha256.Sum256([]byte(clientToken)), crmURL, op.TokenURL(), backendResource, refusesCalls(t))))
	if err != nil {
		t.Fatal(err)
	}
	a := startRouter(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "alice", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: a.URL(), MaxRetries: -1,
		HTTPClient: &http.Client{Transport: bearerTransport{clientToken}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "crm__echo", Arguments: map[string]any{"text": "hi"}})
	if err != nil {
		t.Fatal(err)
	}
	if txt, ok := res.Content[0].(*mcp.TextContent); !ok || txt.Text != "hi" {
		t.Fatalf("result %+v", res.Content)
	}
	_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "strict__echo", Arguments: map[string]any{}})
	if err == nil || !strings.Contains(err.Error(), "backend strict refused the router's credentials") {
		t.Fatalf("call refused by its backend: %v", err)
	}

	b.mu.Lock()
	defer b.mu.Unlock()
	for _, s := range b.subjects {
		if s != "router" {
			t.Fatalf("the backend saw a request as %q", s)
		}
	}
	for _, v := range b.values {
		if strings.Contains(v, clientToken) {
			t.Fatal("the client's token reached the backend")
		}
	}
}
