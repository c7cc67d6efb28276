package app_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/cmd/mcprouter/app"
	"github.com/mcprouter/mcprouter/internal/mcpraw"
)

// TestVirtualServersReload: a reload adds a virtual server (reachable at once),
// changes one's selection (its session gets tools/list_changed and then lists the new
// selection), changes one's auth (credentials now required), removes one (its
// sessions get 404, a legacy one's stream ends, and a new client gets 404 too), and leaves an unchanged one's session as it was.
func TestVirtualServersReload(t *testing.T) {
	ab := twoBackends(t)
	const token = "vs-reload-token-1"
	sum := sha256.Sum256([]byte(token))
	head := fmt.Sprintf("listen: 127.0.0.1:0\nbackends:\n  - {name: a, url: %q}\n  - {name: b, url: %q}\nvirtual_servers:\n", ab.Backends[0].URL, ab.Backends[1].URL)
	file := head + `  - {name: same, backends: [a], auth: {mode: off}}
  - {name: narrowed, backends: [b], auth: {mode: off}}
  - {name: locked, backends: [a], auth: {mode: off}}
  - {name: gone, backends: [b], auth: {mode: off}}
`
	load := func() (app.Config, error) { return app.ParseConfig([]byte(file)) }
	cfg, err := load()
	if err != nil {
		t.Fatal(err)
	}
	r := startRouter(t, cfg)
	r.EnableReload("mcprouter.yaml", load)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	clients := map[string]*mcpraw.Client{}
	for _, name := range []string{"same", "narrowed", "gone"} {
		clients[name] = openSession(t, ctx, r.VServerURL(name), "")
	}
	if got := listTools(t, ctx, clients["narrowed"]); !strings.Contains(got, `"b__echo"`) {
		t.Fatalf("narrowed lists %s before the reload, want b__echo", got)
	}
	notices := stream(t, ctx, clients["narrowed"])
	legacy := openLegacy(t, ctx, "http://"+r.Addr(), "/mcp/gone/sse")
	legacy.call(1, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)

	file = head + `  - {name: same, backends: [a], auth: {mode: off}}
  - {name: narrowed, backends: [b], exclude: [b__echo], auth: {mode: off}}
  - {name: locked, backends: [a], auth: {mode: bearer, resource: "http://127.0.0.1/mcp/locked", bearer_tokens: [{principal: alice, sha256: ` + hex.EncodeToString(sum[:]) + `}]}}
  - {name: added, backends: [a], include: ["a__echo"], auth: {mode: off}}
`
	if err := r.Reload("test"); err != nil {
		t.Fatalf("reload: %v", err)
	}

	select {
	case m := <-notices:
		if m != "notifications/tools/list_changed" {
			t.Errorf("narrowed's first notice after the reload is %s, want notifications/tools/list_changed", m)
		}
	case <-ctx.Done():
		t.Fatal("narrowed got no list_changed after its selection changed")
	}
	if got := listTools(t, ctx, clients["narrowed"]); strings.Contains(got, `"b__echo"`) || !strings.Contains(got, `"b__`) {
		t.Errorf("narrowed lists %s after the reload, want b's tools without b__echo", got)
	}
	if rep, err := clients["same"].Post(ctx, `{"jsonrpc":"2.0","id":7,"method":"ping"}`); err != nil || rep.Status != 200 {
		t.Errorf("the unchanged virtual server's session after the reload: %v %v, want 200", err, rep)
	}
	if rep, err := clients["gone"].Post(ctx, `{"jsonrpc":"2.0","id":7,"method":"ping"}`); err != nil || rep.Status != http.StatusNotFound {
		t.Errorf("the removed virtual server's session after the reload: %v %v, want 404", err, rep)
	}
	// The removed virtual server's legacy stream ends (within ctx), and its POSTs get 404.
	ended := false
	for range 1000 {
		if _, err := legacy.stream.Next(); err != nil {
			ended = true
			break
		}
	}
	if !ended {
		t.Error("the removed virtual server's legacy stream did not end")
	}
	if resp, err := http.Post("http://"+r.Addr()+legacy.endpoint, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":2,"method":"ping"}`)); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Errorf("the removed virtual server's legacy session after the reload: %v %v, want 404", err, resp)
	} else {
		resp.Body.Close()
	}
	fresh := &mcpraw.Client{URL: r.VServerURL("gone"), Version: "2025-03-26", HTTP: &http.Client{}}
	if rep, err := fresh.Initialize(ctx, "{}"); err != nil || rep.Status != http.StatusNotFound {
		t.Errorf("a new client of the removed virtual server: %v %v, want 404", err, rep)
	}
	added := openSession(t, ctx, r.VServerURL("added"), "")
	if got := listTools(t, ctx, added); !strings.Contains(got, `"a__echo"`) || strings.Count(got, `"name"`) != 1 {
		t.Errorf("the added virtual server lists %s, want a__echo alone", got)
	}
	for tok, want := range map[string]int{"": http.StatusUnauthorized, token: 200} {
		c := &mcpraw.Client{URL: r.VServerURL("locked"), Token: tok, Version: "2025-03-26", HTTP: &http.Client{}}
		if rep, err := c.Initialize(ctx, "{}"); err != nil || rep.Status != want {
			t.Errorf("locked with token %q after its auth changed: %v %v, want %d", tok, err, rep, want)
		}
	}
}

// listTools returns the body of c's tools/list reply.
func listTools(t *testing.T, ctx context.Context, c *mcpraw.Client) string {
	t.Helper()
	rep, err := c.Post(ctx, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	if err != nil || rep.Status != 200 {
		t.Fatalf("tools/list: %v %v", err, rep)
	}
	return string(rep.Body)
}
