package main

// End-to-end tests of virtual servers (issue 14): one mcprouter process in front of two
// reference backends serves its main endpoint and two more, /mcp/team-a (backend a
// without a__fail, static bearer tokens) and /mcp/team-b (b__echo and b's prompts
// only, JWT access tokens of a real OpenID provider on loopback, and a rule of its
// own). The Go SDK and mcp-go clients see and call each endpoint's selection only; raw
// HTTP checks that credentials and sessions do not cross endpoints and that each one
// has its own protected resource metadata.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	mcpgoclient "github.com/mark3labs/mcp-go/client"
	mcpgotransport "github.com/mark3labs/mcp-go/client/transport"
	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcprouter/mcprouter/cmd/mcpbackend/mcpbackendtest"
	backendsrv "github.com/mcprouter/mcprouter/cmd/mcpbackend/server"
	"github.com/mcprouter/mcprouter/internal/mcpraw"
	"github.com/mcprouter/mcprouter/internal/testbin"
	"github.com/mcprouter/mcprouter/internal/testwait"
	"github.com/mcprouter/mcprouter/transport/auth/authtest"
)

// The static tokens of the virtual server router: the main endpoint's alice, and team-a's.
const (
	vsMainToken = "vs-main-alice-token-1"
	vsTeamToken = "vs-team-a-alice-token-2"
)

// vsRouter is the virtual server router and the provider of team-b's tokens.
type vsRouter struct {
	*routerProc
	op *authtest.Provider
}

func (r *vsRouter) teamBResource() string { return r.url("/mcp/team-b") }

// teamBToken is a JWT of subject for team-b.
func (r *vsRouter) teamBToken(subject string) string {
	return r.op.Token(authtest.Claims{Subject: subject, Audience: []string{r.teamBResource()}, Scopes: []string{"mcp"}})
}

// startVSRouter starts a router in front of backends a and b with two virtual servers:
// team-a (a's tools but a__fail, bearer) and team-b (three of b's, JWT from a test
// provider, a policy of its own). It starts processes, so -short skips the test.
func startVSRouter(t *testing.T) *vsRouter {
	t.Helper()
	testbin.Long(t, "starts processes")
	backends := mcpbackendtest.StartAB(t, backendsrv.Config{Tick: -1})
	op := authtest.Start(t, authtest.Options{})
	addr := testbin.FreeAddr(t)
	cfg := backends + fmt.Sprintf(`auth:
  mode: bearer
  resource: http://%[1]s/mcp
  bearer_tokens:
    - {principal: alice, sha256: %[2]q}
virtual_servers:
  - name: team-a
    backends: [a]
    exclude: ["a__fail"]
    auth:
      mode: bearer
      resource: http://%[1]s/mcp/team-a
      bearer_tokens:
        - {principal: alice, sha256: %[3]q}
  - name: team-b
    backends: [b]
    include: ["b__echo", "b__greet", "b__summarize"]
    auth:
      mode: jwt
      resource: http://%[1]s/mcp/team-b
      issuer: %[4]s
      required_scopes: [mcp]
    policy:
      rules:
        - name: no-summaries-for-mallory
          deny: 'principal.sub == "mallory" && mcp.prompt == "b__summarize"'
`, addr, sha256Hex(vsMainToken), sha256Hex(vsTeamToken), op.Issuer)
	return &vsRouter{routerProc: startRouter(t, "--config", writeConfig(t, cfg), "--listen", addr), op: op}
}

// TestVirtualServers: each endpoint shows and serves its own selection to the Go SDK
// (team-a, bearer) and mcp-go (team-b, JWT); the main endpoint still serves everything.
func TestVirtualServers(t *testing.T) {
	r := startVSRouter(t)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()

	connect := func(path, token string) *mcp.ClientSession {
		t.Helper()
		s, err := goSDKClient().Connect(ctx, &mcp.StreamableClientTransport{Endpoint: r.url(path), HTTPClient: authClient(token), MaxRetries: -1}, nil)
		if err != nil {
			t.Fatalf("%s: connect: %v", path, err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	main, team := connect("/mcp", vsMainToken), connect("/mcp/team-a", vsTeamToken)
	all, _ := toolNames(t, main)
	if !slices.Contains(all, "a__fail") || !slices.Contains(all, "b__echo") {
		t.Fatalf("the main endpoint lists %v, want every tool of both backends", all)
	}
	got, _ := toolNames(t, team)
	var want []string
	for _, n := range all {
		if strings.HasPrefix(n, "a__") && n != "a__fail" {
			want = append(want, n)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("team-a lists %v, want %v", got, want)
	}
	prompts, err := team.ListPrompts(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range prompts.Prompts {
		if !strings.HasPrefix(p.Name, "a__") {
			t.Errorf("team-a lists prompt %s of another backend", p.Name)
		}
	}
	if _, err := team.CallTool(ctx, &mcp.CallToolParams{Name: "a__echo", Arguments: map[string]any{"text": "team-a"}}); err != nil {
		t.Fatalf("team-a calling a__echo: %v", err)
	}
	for _, tool := range []string{"a__fail", "b__echo"} {
		_, err := team.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"text": "x"}})
		if err == nil || !strings.Contains(err.Error(), "not exposed by this endpoint") {
			t.Errorf("team-a calling %s: %v, want a denial saying it is not exposed", tool, err)
		}
	}

	// team-b with mcp-go and JWTs: its include list, and its own rule.
	mcpgoTeamB := func(subject string) *mcpgoclient.Client {
		c, err := mcpgoclient.NewStreamableHttpClient(r.teamBResource(), mcpgotransport.WithHTTPTimeout(testTimeout),
			mcpgotransport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + r.teamBToken(subject)}))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		startMCPGo(t, ctx, c, "2025-06-18", "vserver-e2e-"+subject)
		return c
	}
	bob, mallory := mcpgoTeamB("bob"), mcpgoTeamB("mallory")
	if names := mcpgoToolNames(t, ctx, bob); !slices.Equal(names, []string{"b__echo"}) {
		t.Fatalf("team-b lists %v, want b__echo alone", names)
	}
	mcpgoExposes(t, ctx, bob, "team-b", "b__echo", "a__echo")
	for who, c := range map[string]*mcpgoclient.Client{"bob": bob, "mallory": mallory} {
		ps, err := c.ListPrompts(ctx, mcpgo.ListPromptsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, p := range ps.Prompts {
			names = append(names, p.Name)
		}
		slices.Sort(names)
		want := []string{"b__greet", "b__summarize"}
		if who == "mallory" {
			want = []string{"b__greet"}
		}
		if !slices.Equal(names, want) {
			t.Errorf("%s lists prompts %v on team-b, want %v (the endpoint's own rule)", who, names, want)
		}
	}
}

// TestVirtualServerIsolation: credentials of one endpoint are refused on another, a
// session opened on one is not found on another (even for a principal of the same
// name), and each endpoint names its own resource in its metadata document.
func TestVirtualServerIsolation(t *testing.T) {
	r := startVSRouter(t)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	hc := &http.Client{Timeout: testTimeout}

	for _, c := range []struct{ path, token string }{
		{"/mcp/team-a", vsMainToken},
		{"/mcp", vsTeamToken},
		{"/mcp/team-b", vsTeamToken},
		{"/mcp/team-a", r.teamBToken("bob")},
	} {
		raw := &mcpraw.Client{URL: r.url(c.path), Token: c.token, Version: "2025-03-26", HTTP: hc}
		if rep, err := raw.Initialize(ctx, "{}"); err != nil || rep.Status != http.StatusUnauthorized {
			t.Errorf("%s with another endpoint's token: %v %v, want 401", c.path, err, rep)
		}
	}

	team := &mcpraw.Client{URL: r.url("/mcp/team-a"), Token: vsTeamToken, Version: "2025-03-26", HTTP: hc}
	if rep, err := team.Initialize(ctx, "{}"); err != nil || rep.Status != 200 || team.Session == "" {
		t.Fatalf("team-a initialize: %v %v", err, rep)
	}
	ping := `{"jsonrpc":"2.0","id":9,"method":"ping"}`
	if rep, err := team.Post(ctx, ping); err != nil || rep.Status != 200 {
		t.Fatalf("team-a ping on its own session: %v %v", err, rep)
	}
	// alice of the main endpoint presents team-a alice's session there.
	stolen := &mcpraw.Client{URL: r.url("/mcp"), Token: vsMainToken, Version: "2025-03-26", HTTP: hc, Session: team.Session}
	if rep, err := stolen.Post(ctx, ping); err != nil || rep.Status != http.StatusNotFound {
		t.Errorf("team-a's session on the main endpoint: %v %v, want 404", err, rep)
	}
	other := &mcpraw.Client{URL: r.teamBResource(), Token: r.teamBToken("alice"), Version: "2025-03-26", HTTP: hc, Session: team.Session}
	if rep, err := other.Post(ctx, ping); err != nil || rep.Status != http.StatusNotFound {
		t.Errorf("team-a's session on team-b: %v %v, want 404", err, rep)
	}

	for path, want := range map[string]string{
		"/.well-known/oauth-protected-resource/mcp":        r.url("/mcp"),
		"/.well-known/oauth-protected-resource/mcp/team-a": r.url("/mcp/team-a"),
		"/.well-known/oauth-protected-resource/mcp/team-b": r.teamBResource(),
	} {
		resp, err := hc.Get(r.url(path))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var doc struct {
			Resource             string   `json:"resource"`
			AuthorizationServers []string `json:"authorization_servers"`
		}
		if resp.StatusCode != 200 || json.Unmarshal(body, &doc) != nil || doc.Resource != want {
			t.Errorf("GET %s: %d %s, want the metadata of %s", path, resp.StatusCode, body, want)
		}
		if strings.HasSuffix(path, "team-b") && !slices.Equal(doc.AuthorizationServers, []string{r.op.Issuer}) {
			t.Errorf("team-b's metadata names %v, want its issuer", doc.AuthorizationServers)
		}
	}
	// A client without a token is pointed at its endpoint's metadata.
	raw := &mcpraw.Client{URL: r.teamBResource(), Version: "2025-03-26", HTTP: hc}
	req := raw.NewRequest(ctx, http.MethodPost, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`)
	resp, err := raw.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if ch := resp.Header.Get("WWW-Authenticate"); resp.StatusCode != 401 || !strings.Contains(ch, "/.well-known/oauth-protected-resource/mcp/team-b") {
		t.Errorf("team-b without a token: %d %q, want 401 naming its own metadata", resp.StatusCode, ch)
	}
}

// TestVirtualServerLegacySSE: a legacy HTTP+SSE client (mcp-go's) on team-a's
// /mcp/team-a/sse sees and calls the endpoint's selection only, under its auth: its
// stream announces the endpoint's own message path, and another endpoint's token is
// refused.
func TestVirtualServerLegacySSE(t *testing.T) {
	r := startVSRouter(t)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()

	hc := &http.Client{Timeout: testTimeout}
	for token, want := range map[string]int{vsMainToken: http.StatusUnauthorized, "": http.StatusUnauthorized} {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, r.url("/mcp/team-a/sse"), nil)
		req.Header.Set("Accept", "text/event-stream")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET /mcp/team-a/sse with token %q: %d, want %d", token, resp.StatusCode, want)
		}
	}

	c, err := mcpgoclient.NewSSEMCPClient(r.url("/mcp/team-a/sse"),
		mcpgoclient.WithHeaders(map[string]string{"Authorization": "Bearer " + vsTeamToken}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	startMCPGo(t, ctx, c, "2024-11-05", "vserver-legacy")
	if ep := c.GetTransport().(*mcpgotransport.SSE).GetEndpoint(); ep == nil || ep.Path != "/mcp/team-a/message" {
		t.Errorf("team-a's stream announced %v, want its own /mcp/team-a/message", ep)
	}
	names := mcpgoToolNames(t, ctx, c)
	if !slices.Contains(names, "a__echo") || slices.ContainsFunc(names, func(n string) bool { return n == "a__fail" || !strings.HasPrefix(n, "a__") }) {
		t.Fatalf("team-a over legacy SSE lists %v, want a's tools without a__fail", names)
	}
	mcpgoExposes(t, ctx, c, "team-a over legacy SSE", "a__echo", "a__fail")
}

// mcpgoToolNames lists the names of the tools the mcp-go client c sees (one page: the
// endpoints of these tests expose few).
func mcpgoToolNames(t *testing.T, ctx context.Context, c *mcpgoclient.Client) []string {
	t.Helper()
	tools, err := c.ListTools(ctx, mcpgo.ListToolsRequest{})
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
	}
	return names
}

// mcpgoExposes checks that who, an mcp-go client c of one endpoint, gets a result from
// tool and is refused other as not exposed by the endpoint.
func mcpgoExposes(t *testing.T, ctx context.Context, c *mcpgoclient.Client, who, tool, other string) {
	t.Helper()
	call := mcpgo.CallToolRequest{}
	call.Params.Name, call.Params.Arguments = tool, map[string]any{"text": who}
	if res, err := c.CallTool(ctx, call); err != nil || res.IsError {
		t.Fatalf("%s calling %s: %v %+v", who, tool, err, res)
	}
	call.Params.Name = other
	if _, err := c.CallTool(ctx, call); err == nil || !strings.Contains(err.Error(), "not exposed") {
		t.Fatalf("%s calling %s: %v, want refused as not exposed", who, other, err)
	}
}

// TestVirtualServersReloadProcess: a running mcprouter whose configuration file is
// rewritten narrows one virtual server, removes another and adds a third. The Go SDK
// client of the narrowed one hears tools/list_changed and lists the new selection on
// the same session; the mcp-go legacy SSE client of the removed one loses its stream
// and a new one gets 404; the added one serves its selection at once.
func TestVirtualServersReloadProcess(t *testing.T) {
	testbin.Long(t, "starts processes")
	path := filepath.Join(t.TempDir(), "mcprouter.yaml")
	reloadConfig(t, path, []string{"keep"}, `virtual_servers:
  - {name: narrow, backends: [keep], auth: {mode: off}}
  - {name: gone, backends: [keep], auth: {mode: off}}
`)
	p := startRouter(t, "--config", path)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()

	changed := make(chan struct{}, 16)
	client := mcp.NewClient(&mcp.Implementation{Name: "vs-reload", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	})
	narrow, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: p.url("/mcp/narrow"), MaxRetries: -1}, nil)
	if err != nil {
		t.Fatalf("narrow: connect: %v\n%s", err, p.Log)
	}
	defer narrow.Close()
	if names, _ := toolNames(t, narrow); !slices.Contains(names, "keep__echo") {
		t.Fatalf("narrow lists %v before the reload, want keep__echo", names)
	}
	gone, err := mcpgoclient.NewSSEMCPClient(p.url("/mcp/gone/sse"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gone.Close() })
	startMCPGo(t, ctx, gone, "2024-11-05", "vs-reload-legacy")
	if _, err := gone.ListTools(ctx, mcpgo.ListToolsRequest{}); err != nil {
		t.Fatalf("gone: tools/list before the reload: %v", err)
	}

	reloadConfig(t, path, []string{"keep"}, `virtual_servers:
  - {name: narrow, backends: [keep], exclude: [keep__echo], auth: {mode: off}}
  - {name: fresh, backends: [keep], include: [keep__echo], auth: {mode: off}}
`)
	testwait.Recv(t, "narrow's list_changed after the reload", testTimeout, changed)
	if names, _ := toolNames(t, narrow); slices.Contains(names, "keep__echo") || len(names) == 0 {
		t.Errorf("narrow lists %v after the reload, want keep's tools without keep__echo", names)
	}
	fresh, err := goSDKClient().Connect(ctx, &mcp.StreamableClientTransport{Endpoint: p.url("/mcp/fresh"), MaxRetries: -1}, nil)
	if err != nil {
		t.Fatalf("fresh: connect: %v\n%s", err, p.Log)
	}
	defer fresh.Close()
	if names, _ := toolNames(t, fresh); !slices.Equal(names, []string{"keep__echo"}) {
		t.Errorf("fresh lists %v, want keep__echo alone", names)
	}
	if _, err := gone.ListTools(ctx, mcpgo.ListToolsRequest{}); err == nil {
		t.Error("the removed virtual server's legacy session still answers")
	}
	resp, err := http.Get(p.url("/mcp/gone/sse"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /mcp/gone/sse after the reload: %d, want 404", resp.StatusCode)
	}
}

// TestVirtualServersReloadListen: with stateless clients served (`stateless: on`), the Go
// SDK client on 2026-07-28 of a virtual server that a reload narrows hears
// tools/list_changed on its subscriptions/listen stream, as a session's client hears it
// on its GET stream (TestVirtualServersReloadProcess), and lists the new selection.
func TestVirtualServersReloadListen(t *testing.T) {
	testbin.Long(t, "starts processes")
	path := filepath.Join(t.TempDir(), "mcprouter.yaml")
	reloadConfig(t, path, []string{"keep"}, "stateless: on\nvirtual_servers:\n  - {name: narrow, backends: [keep], auth: {mode: off}}\n")
	p := startRouter(t, "--config", path)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()

	changed := make(chan struct{}, 16)
	client := mcp.NewClient(&mcp.Implementation{Name: "vs-reload-listen", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { offer(changed, struct{}{}) },
	})
	narrow, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: p.url("/mcp/narrow"), MaxRetries: -1}, nil)
	if err != nil {
		t.Fatalf("narrow: connect: %v\n%s", err, p.Log)
	}
	defer narrow.Close()
	if v := narrow.InitializeResult().ProtocolVersion; v != "2026-07-28" {
		t.Fatalf("negotiated %q, want 2026-07-28 (stateless)", v)
	}
	if names, _ := toolNames(t, narrow); !slices.Contains(names, "keep__echo") {
		t.Fatalf("narrow lists %v before the reload, want keep__echo", names)
	}
	// The client opens its listen stream in the background, and a change made before
	// it is open is not told on it: the selection is narrowed and widened again until
	// a list_changed arrives, then left narrowed.
	wide := "stateless: on\nvirtual_servers:\n  - {name: narrow, backends: [keep], auth: {mode: off}}\n"
	narrowed := "stateless: on\nvirtual_servers:\n  - {name: narrow, backends: [keep], exclude: [keep__echo], auth: {mode: off}}\n"
	heard := false
	for i := 0; i < 20 && !heard; i++ {
		cfg := narrowed
		if i%2 == 1 {
			cfg = wide
		}
		reloadConfig(t, path, []string{"keep"}, cfg)
		select {
		case <-changed:
			heard = true
		case <-time.After(testTimeout / 10):
		}
	}
	if !heard {
		t.Fatal("no tools/list_changed on the listen stream after 20 reloads")
	}
	reloadConfig(t, path, []string{"keep"}, narrowed)
	testwait.For(t, "narrow's selection after the reload", testTimeout, func() bool {
		names, _ := toolNames(t, narrow)
		return len(names) > 0 && !slices.Contains(names, "keep__echo")
	})
}
