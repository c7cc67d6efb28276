package app_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/cmd/mcprouter/app"
	"github.com/mcprouter/mcprouter/internal/mcpraw"
	"github.com/mcprouter/mcprouter/internal/testmetrics"
	"github.com/mcprouter/mcprouter/router/policy"
	"github.com/mcprouter/mcprouter/transport/auth"
)

// TestVirtualServersConfig: each mistake in virtual_servers is refused naming its key.
func TestVirtualServersConfig(t *testing.T) {
	base := "backends:\n  - {name: a, url: \"http://127.0.0.1:1/mcp\"}\nvirtual_servers:\n"
	for _, c := range []struct{ vs, want string }{
		{"  - {backends: [a]}\n", "virtual_servers[0].name: required"},
		{"  - {name: \"team a\"}\n", "virtual_servers[0].name: \"team a\": only letters"},
		{"  - {name: t}\n  - {name: t}\n", "virtual_servers[1].name: \"t\" is used twice"},
		{"  - {name: t, backends: [a, z]}\n", "virtual_servers[0].backends[1]: \"z\" is not the name of a backend"},
		{"  - {name: t, include: [\"\"]}\n", "virtual_servers[0].include[0]: an empty pattern"},
		{"  - {name: t, auth: {mode: bearer}}\n", "virtual_servers[0].auth.resource: required"},
		{"  - {name: t, auth: {mode: magic}}\n", "virtual_servers[0].auth.mode: unknown mode"},
		{"  - {name: t, auth: {mode: bearer, resource: \"http://h/mcp\", bearer_tokens: [{principal: a, sha256: " + strings.Repeat("ab", 32) + "}]}}\n",
			"virtual_servers[0].auth.resource: \"http://h/mcp\" is the main endpoint's"},
		{"  - {name: t, policy: {rules: [{allow: 'principal.sub ==='}]}}\n", "virtual_servers[0].policy.rules[0]"},
	} {
		cfg, err := app.ParseConfig([]byte(base + c.vs))
		if err == nil {
			cfg.Defaults()
			err = cfg.Validate()
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", strings.TrimSpace(c.vs), err, c.want)
		}
	}
	cfg, err := app.ParseConfig([]byte(base + "  - {name: team-a, backends: [a], include: [\"a__*\"], exclude: [a__fail], policy: {rules: [{allow: 'principal.sub == \"x\"'}]}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		t.Fatalf("a valid virtual server: %v", err)
	}
}

// TestPolicySwapListChanged: Fleet.SetPolicy swaps the policy of a running router, and
// the sessions whose view of a list changed, and only those, get that list's
// list_changed. Each client's GET stream delivers in order, so the first notice a
// client gets after two swaps says which swap changed its view.
func TestPolicySwapListChanged(t *testing.T) {
	tokens := map[string]string{"alice": "swap-alice-token-1", "bob": "swap-bob-token-2"}
	cfg := twoBackends(t)
	cfg.Auth.Mode, cfg.Auth.Resource = "bearer", "http://127.0.0.1/mcp"
	for p, tok := range tokens {
		sum := sha256.Sum256([]byte(tok))
		cfg.Auth.BearerTokens = append(cfg.Auth.BearerTokens, auth.BearerToken{Principal: p, SHA256: hex.EncodeToString(sum[:])})
	}
	first := []policy.Rule{{Allow: `principal.sub == "alice"`}, {Allow: `principal.sub == "bob" && mcp.tool == "a__echo"`}}
	cfg.Policy.Rules = first
	r := startRouter(t, cfg)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	notices := map[string]<-chan string{}
	for p, tok := range tokens {
		notices[p] = stream(t, ctx, openSession(t, ctx, r.URL(), tok))
	}

	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	swap := func(rules ...policy.Rule) {
		e, err := policy.New(policy.Config{Rules: rules}, policy.Options{Logger: log})
		if err != nil {
			t.Fatal(err)
		}
		r.Fleet.SetPolicy(e)
	}
	// Bob may now use b__echo too: his tools changed, alice's did not.
	swap(append(first, policy.Rule{Allow: `principal.sub == "bob" && mcp.tool == "b__echo"`})...)
	// Alice may no longer get a__greet: her prompts changed, bob's (none) did not.
	swap(append(first, policy.Rule{Allow: `principal.sub == "bob" && mcp.tool == "b__echo"`},
		policy.Rule{Deny: `principal.sub == "alice" && mcp.prompt == "a__greet"`})...)
	// The counters are the engine in force's: bob's denied call counts.
	bob := openSession(t, ctx, r.URL(), tokens["bob"])
	if rep, err := bob.Post(ctx, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"a__fail","arguments":{}}}`); err != nil || rep.Status != http.StatusForbidden {
		t.Fatalf("bob calling a__fail: %v %v, want 403", err, rep)
	}
	if denied := series(t, r, "mcprouter_policy_decisions_total")["mcprouter_policy_decisions_total,outcome=denied"]; denied < 1 {
		t.Errorf("mcprouter_policy_decisions_total{outcome=denied} = %v after a denial under the swapped policy", denied)
	}
	for p, want := range map[string]string{"bob": "notifications/tools/list_changed", "alice": "notifications/prompts/list_changed"} {
		select {
		case got := <-notices[p]:
			if got != want {
				t.Errorf("%s's first notice after the swaps is %s, want %s", p, got, want)
			}
		case <-ctx.Done():
			t.Fatalf("%s got no notice after the swaps", p)
		}
	}
}

// stream opens c's GET stream and sends the method of each notification on it, until
// ctx ends; it returns once the stream is open.
func stream(t *testing.T, ctx context.Context, c *mcpraw.Client) <-chan string {
	t.Helper()
	resp, err := c.Do(c.NewRequest(ctx, http.MethodGet, ""))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET stream: %v %v", err, resp)
	}
	out := make(chan string, 16)
	go func() {
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			line, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			if _, rest, ok := strings.Cut(line, `"method":"`); ok {
				m, _, _ := strings.Cut(rest, `"`)
				select {
				case out <- m:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return out
}

// startXY starts a router with two virtual servers, auth off: x serves backend a's
// tools but a__fail, y serves backend b's.
func startXY(t *testing.T) *app.App {
	t.Helper()
	cfg := twoBackends(t)
	cfg.VirtualServers = []app.VirtualServer{
		{Name: "x", Backends: []string{"a"}, Exclude: []string{"a__fail"}, Auth: auth.Config{Mode: auth.ModeOff}},
		{Name: "y", Backends: []string{"b"}, Auth: auth.Config{Mode: auth.ModeOff}},
	}
	return startRouter(t, cfg)
}

// TestVirtualServersAuthOff: two virtual servers with auth off each serve their
// backend's tools to anyone, as their own anonymous principal: a session opened on one
// is not found on the other.
func TestVirtualServersAuthOff(t *testing.T) {
	r := startXY(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	x := openSession(t, ctx, r.VServerURL("x"), "")
	if x.Session == "" {
		t.Fatal("x: initialize gave no session")
	}
	rep, err := x.Post(ctx, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	if err != nil || rep.Status != 200 || !strings.Contains(string(rep.Body), `"a__echo"`) || strings.Contains(string(rep.Body), `"b__`) {
		t.Fatalf("x: tools/list: %v %v, want a's tools only", err, rep)
	}
	y := &mcpraw.Client{URL: r.VServerURL("y"), Version: "2025-03-26", HTTP: &http.Client{}, Session: x.Session}
	if rep, err := y.Post(ctx, `{"jsonrpc":"2.0","id":3,"method":"ping"}`); err != nil || rep.Status != http.StatusNotFound {
		t.Fatalf("x's session on y: %v %v, want 404", err, rep)
	}
	main := &mcpraw.Client{URL: r.URL(), Version: "2025-03-26", HTTP: &http.Client{}, Session: x.Session}
	if rep, err := main.Post(ctx, `{"jsonrpc":"2.0","id":4,"method":"ping"}`); err != nil || rep.Status != http.StatusNotFound {
		t.Fatalf("x's session on the main endpoint: %v %v, want 404", err, rep)
	}
}

// TestVirtualServerMetrics: the per-endpoint counters move for the endpoint that
// served the requests and no other: its calls by outcome, its denials (a tool outside
// its selection), its sessions.
func TestVirtualServerMetrics(t *testing.T) {
	r := startXY(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, name := range []string{"x", "y"} {
		c := openSession(t, ctx, r.VServerURL(name), "")
		if name != "x" {
			continue
		}
		if rep, err := c.Post(ctx, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"a__echo","arguments":{"text":"hi"}}}`); err != nil || rep.Status != 200 || !strings.Contains(string(rep.Body), `"result"`) {
			t.Fatalf("x calling a__echo: %v %v", err, rep)
		}
		if rep, err := c.Post(ctx, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"a__fail","arguments":{}}}`); err != nil || !strings.Contains(string(rep.Body), "not exposed") {
			t.Fatalf("x calling a__fail: %v %v, want refused", err, rep)
		}
	}
	testmetrics.Expect(t, series(t, r, "mcprouter_endpoint_"), map[string]float64{
		"mcprouter_endpoint_requests_total,endpoint=x,outcome=ok":      2, // initialize, a__echo
		"mcprouter_endpoint_requests_total,endpoint=x,outcome=error":   1, // a__fail, refused
		"mcprouter_endpoint_requests_total,endpoint=y,outcome=ok":      1, // initialize
		"mcprouter_endpoint_requests_total,endpoint=y,outcome=error":   0,
		"mcprouter_endpoint_requests_total,endpoint=(main),outcome=ok": 0,
		"mcprouter_endpoint_policy_denied_total,endpoint=x":            1,
		"mcprouter_endpoint_policy_denied_total,endpoint=y":            0,
		"mcprouter_endpoint_policy_denied_total,endpoint=(main)":       0,
		"mcprouter_endpoint_policy_limited_total,endpoint=x":           0,
		"mcprouter_endpoint_sessions,endpoint=x":                       1,
		"mcprouter_endpoint_sessions,endpoint=y":                       1,
		"mcprouter_endpoint_sessions,endpoint=(main)":                  0,
	})
}
