package cluster

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/cmd/mcprouter/app"
	"github.com/mcprouter/mcprouter/cmd/mcprouter/app/apptest"
	"github.com/mcprouter/mcprouter/internal/mcpraw"
	"github.com/mcprouter/mcprouter/internal/testwait"
	"github.com/mcprouter/mcprouter/transport/auth"
	"github.com/mcprouter/mcprouter/transport/auth/authtest"
	"github.com/mcprouter/mcprouter/transport/natsbus"
)

// authResource is the canonical URI of the authenticating routers of these tests: the
// audience of their tokens (they serve one resource under several addresses).
const authResource = "http://127.0.0.1/mcp"

// startAuthRouter runs one router instance on the NATS server at natsURL that accepts
// JWTs of issuer only.
func startAuthRouter(t *testing.T, name, natsURL, backendURL, issuer string) *app.App {
	t.Helper()
	cfg := routerConfig(name, natsURL, backendURL)
	cfg.Auth = auth.Config{Mode: auth.ModeJWT, Resource: authResource, Issuer: issuer}
	return apptest.Start(t, cfg, quiet(t), 10*time.Second)
}

// authPost sends body on session sid (none when "") with token and returns the status,
// the session id answered and the body.
func authPost(t *testing.T, endpoint, token, sid, body string) (int, string, string) {
	t.Helper()
	c := &mcpraw.Client{URL: endpoint, Token: token, Session: sid}
	r, err := c.Post(context.Background(), body)
	if err != nil {
		t.Fatal(err)
	}
	return r.Status, r.Header.Get("Mcp-Session-Id"), string(r.Body)
}

// TestAdoptedSessionKeepsItsPrincipal: a session opened by alice on instance A is
// carried on by instance B after A went away, for alice only. Bob, with a valid token
// and alice's session id, gets 404 from B before the adoption (and B builds nothing for
// him) and after it; the session record names alice.
func TestAdoptedSessionKeepsItsPrincipal(t *testing.T) {
	nodes := startNATS(t, 3)
	backend := startBackend(t)
	op := authtest.Start(t, authtest.Options{})
	a := startAuthRouter(t, "a", nodes[0].url(), backend.URL(), op.Issuer)
	b := startAuthRouter(t, "b", nodes[1].url(), backend.URL(), op.Issuer)
	alice := op.Token(authtest.Claims{Subject: "alice", Audience: []string{authResource}})
	bob := op.Token(authtest.Claims{Subject: "bob", Audience: []string{authResource}})

	status, sid, body := authPost(t, a.URL(), alice, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"auth","version":"1"}}}`)
	if status != 200 || sid == "" {
		t.Fatalf("alice's initialize on a: %d %s", status, body)
	}
	authPost(t, a.URL(), alice, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if status, _, body := authPost(t, a.URL(), bob, sid, `{"jsonrpc":"2.0","id":2,"method":"ping"}`); status != 404 {
		t.Fatalf("bob on a: %d %s", status, body)
	}
	a.Shutdown(t.Context())
	var rec string
	testwait.For(t, "alice's session record on b's node", 20*time.Second, func() bool {
		rec = storedRecord(t, nodes[1].url(), "mcpr_sessions", natsbus.RecordKey(sid))
		return strings.Contains(rec, op.Issuer+" alice") // the principal's ID, in a binary record
	})

	ping := `{"jsonrpc":"2.0","id":3,"method":"ping"}`
	if status, _, body := authPost(t, b.URL(), bob, sid, ping); status != 404 {
		t.Fatalf("bob on b before the adoption: %d %s", status, body)
	}
	if b.HTTP.Stats.Adopted.Load() != 0 || b.Router.Stats.Adopted.Load() != 0 {
		t.Fatal("b carried alice's session on for bob")
	}
	// Alice carries on with b; b answers 404 while its store has not answered in time
	// (a loaded JetStream): like a real client she tries again, a few times.
	for i := 0; ; i++ {
		status, _, body := authPost(t, b.URL(), alice, sid, ping)
		if status == 200 {
			break
		}
		if status != 404 || i == 2 {
			t.Fatalf("alice on b: %d %s", status, body)
		}
	}
	if status, _, body := authPost(t, b.URL(), bob, sid, ping); status != 404 {
		t.Errorf("bob on b after the adoption: %d %s", status, body)
	}
	if b.HTTP.Stats.Adopted.Load() != 1 || b.HTTP.Stats.ForeignSessions.Load() != 2 {
		t.Errorf("b adopted %d sessions and refused %d requests on another's session, want 1 and 2",
			b.HTTP.Stats.Adopted.Load(), b.HTTP.Stats.ForeignSessions.Load())
	}
}
