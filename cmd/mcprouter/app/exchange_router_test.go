package app_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/cmd/mcprouter/app"
	"github.com/mcprouter/mcprouter/cmd/mcprouter/app/apptest"
	"github.com/mcprouter/mcprouter/internal/mcpraw"
	"github.com/mcprouter/mcprouter/transport/auth/authtest"
)

// TestTokenExchangeThroughRouter: through the real router, a client's per-client
// upstream session with a token_exchange backend carries that client's exchanged token
// (the backend sees alice), never the router's own client credentials token.
func TestTokenExchangeThroughRouter(t *testing.T) {
	op, b, crmURL := startTokenBackend(t)
	const resource = "http://127.0.0.1:8080/mcp"
	cc := fmt.Sprintf("{token_url: %s, client_id: router, client_secret_env: ROUTER_SECRET, resource: %s}", op.TokenURL(), backendResource)
	cfg, err := app.ParseConfig([]byte(fmt.Sprintf(`listen: 127.0.0.1:0
auth:
  mode: jwt
  resource: %s
  issuer: %s
backends:
  - name: crm
    url: %s
    sessions: per-client
    auth:
      client_credentials: %s
      token_exchange: %s
`, resource, op.Issuer, crmURL, cc, cc)))
	if err != nil {
		t.Fatal(err)
	}
	a := apptest.Start(t, cfg, slog.New(slog.NewTextHandler(testWriter{t}, nil)), 20*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tok := op.Token(authtest.Claims{Subject: "alice", Audience: []string{resource}})
	// A 2025-06-18 client (sessions), by hand: initialize, initialized, tools/call.
	c := &mcpraw.Client{URL: a.URL(), Token: tok, Version: "2025-06-18"}
	if r, err := c.Initialize(ctx, ""); err != nil || r.Status != http.StatusOK {
		t.Fatalf("initialize: %v %v", err, r)
	}
	r, err := c.Post(ctx, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"crm__echo","arguments":{"text":"hi"}}}`)
	if err != nil || !strings.Contains(string(r.Body), `"result"`) || strings.Contains(string(r.Body), `"error"`) {
		t.Fatalf("tools/call through the router: %v %v", err, r)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	alice := 0
	for _, s := range b.subjects {
		if s == "alice" {
			alice++
		}
	}
	if alice == 0 {
		t.Fatalf("alice's call reached the backend only as %q: her per-client session did not carry her exchanged token", b.subjects)
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) { w.t.Log(string(b)); return len(b), nil }
