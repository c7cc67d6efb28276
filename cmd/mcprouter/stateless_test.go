package main

// 2026-07-28 clients through mcprouter (issue 12): the official Go SDK client on its
// default revision (2026-07-28, stateless) in front of a reference backend of each era,
// and raw HTTP for every status the revision gives an error.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcprouter/mcprouter/cmd/mcpbackend/mcpbackendtest"
	"github.com/mcprouter/mcprouter/internal/mcpraw"
	"github.com/mcprouter/mcprouter/internal/testbin"
	"github.com/mcprouter/mcprouter/internal/testwait"
)

// startEraBackend starts the reference backend serving one era (--eras) on a loopback
// port and returns its address.
func startEraBackend(t testing.TB, eras string) string {
	t.Helper()
	return startEraBackendProc(t, eras).Addr()
}

// startEraBackendProc is startEraBackend returning the process.
func startEraBackendProc(t testing.TB, eras string) *testbin.Proc {
	t.Helper()
	return testbin.Start(t, testbin.Spec{Name: "mcpbackend-" + eras, Bin: backendBin(t),
		Args:  []string{"--listen", "127.0.0.1:0", "--name", eras, "--eras", eras, "--tools", "60", "--page-size", "25", "--tick", "1h"},
		Ready: []string{"mcpbackend listening"}, Wait: testTimeout})
}

// startRouterFor starts mcprouter in front of the backend at addr, without a prefix.
func startRouterFor(t *testing.T, addr string) *routerProc {
	t.Helper()
	cfg := fmt.Sprintf("stateless: on\nbackends:\n  - name: b\n    prefix: \"\"\n    url: http://%s/mcp\n", addr)
	return startRouter(t, "--config", writeConfig(t, cfg))
}

// TestStatelessGoSDK: the Go SDK client on its default revision lists, calls, reads,
// gets prompts, sees progress and log messages, samples and cancels through the router,
// in front of a 2026-07-28 backend (no translation: the router passes the revision's
// own messages on) and in front of a 2025 one.
func TestStatelessGoSDK(t *testing.T) {
	testbin.Long(t, "starts processes")
	for _, era := range []string{"modern", "legacy"} {
		t.Run(era, func(t *testing.T) {
			p := startRouterFor(t, startEraBackend(t, era))
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			c := mcpbackendtest.Connect(t, ctx, p.streamable(), "")
			defer c.Session.Close()
			res := c.Session.InitializeResult()
			if res.ProtocolVersion != "2026-07-28" {
				t.Fatalf("the client speaks %q through the router, want 2026-07-28", res.ProtocolVersion)
			}
			if res.ServerInfo == nil || res.ServerInfo.Name != "mcprouter" {
				t.Errorf("serverInfo %+v, want mcprouter's", res.ServerInfo)
			}
			mcpbackendtest.Check(t, ctx, c, mcpbackendtest.CheckOptions{ExtraTools: 60, PageSize: routerPageSize})
		})
	}
}

// routerPageSize is the size of the router's pages of merged lists (the fleet's default).
const routerPageSize = 100

// TestStatelessSampling: a 2026-07-28 client calling a 2025 backend's tool that asks
// the client to sample: the router answers input_required, the Go SDK client's sampling
// handler answers, its retry carries the answer to the waiting backend, and the call
// completes (mrtr_test.go tests the requestState refusals over raw HTTP).
func TestStatelessSampling(t *testing.T) {
	testbin.Long(t, "starts processes")
	p := startRouterFor(t, startEraBackend(t, "legacy"))
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	c := mcpbackendtest.Connect(t, ctx, p.streamable(), "")
	for i := range 3 { // each call parks and resumes its own upstream request
		prompt := fmt.Sprintf("hi %d", i)
		res, err := c.Session.CallTool(ctx, &mcp.CallToolParams{Name: "sample", Arguments: map[string]any{"prompt": prompt}})
		if err != nil {
			t.Fatal(err)
		}
		text := ""
		if len(res.Content) > 0 {
			if tc, ok := res.Content[0].(*mcp.TextContent); ok {
				text = tc.Text
			}
		}
		if res.IsError || text != "sampled: "+prompt {
			t.Fatalf("sample through a 2025 backend: %+v %q, want the client's sampled answer", res, text)
		}
	}
}

// postModern sends body to p's MCP endpoint as a 2026-07-28 request: the revision
// header and the Mcp-Method (and, when name is set, Mcp-Name) routing headers.
func postModern(t *testing.T, p *routerProc, body, method, name string) *http.Response {
	t.Helper()
	return postModernAs(t, p, "", body, method, name)
}

// postModernAs is postModern presenting the bearer token (none when "").
func postModernAs(t *testing.T, p *routerProc, token, body, method, name string) *http.Response {
	t.Helper()
	req := mcpraw.NewModernRequest(context.Background(), p.url("/mcp"), body, method, name)
	client := http.DefaultClient
	if token != "" {
		client = authClient(token)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// TestStatelessPrefix: a tool renamed by the router (a backend prefix) is called on a
// 2026-07-28 backend under its own name, with an Mcp-Name header that says so (the
// backend refuses a header that does not match its body).
func TestStatelessPrefix(t *testing.T) {
	testbin.Long(t, "starts processes")
	cfg := fmt.Sprintf("stateless: on\nbackends:\n  - name: b\n    prefix: ref\n    url: http://%s/mcp\n", startEraBackend(t, "modern"))
	p := startRouter(t, "--config", writeConfig(t, cfg))
	resp := postModern(t, p, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ref__echo","arguments":{"text":"hi"},`+statelessMeta+`}}`, "tools/call", "ref__echo")
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"text":"hi"`) || strings.Contains(string(body), `"error"`) {
		t.Fatalf("prefixed call: %d %s", resp.StatusCode, body)
	}
}

// TestStatelessListen: a subscriptions/listen stream through the router: the
// acknowledgement first, with the subscription id and the honoured subset of the filter
// (a resource nobody serves left out), a resource update tagged with the id, and at
// shutdown the graceful end, a result carrying the id.
func TestStatelessListen(t *testing.T) {
	testbin.Long(t, "starts processes")
	p := startRouterFor(t, startEraBackend(t, "legacy"))
	body := `{"jsonrpc":"2.0","id":"L","method":"subscriptions/listen","params":{` + statelessMeta +
		`,"notifications":{"toolsListChanged":true,"resourceSubscriptions":["memo://board","nope://x"]}}}`
	resp := postModern(t, p, body, "subscriptions/listen", "")
	defer resp.Body.Close()
	events := make(chan string, 16)
	go func() {
		defer close(events)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if line, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				events <- line
			}
		}
	}()
	next := func(what string) string {
		t.Helper()
		return testwait.Recv(t, what, testTimeout, events)
	}
	ack := next("the acknowledgement")
	if !strings.Contains(ack, `"method":"notifications/subscriptions/acknowledged"`) || !strings.Contains(ack, `"io.modelcontextprotocol/subscriptionId":"L"`) ||
		!strings.Contains(ack, `"resourceSubscriptions":["memo://board"]`) || !strings.Contains(ack, `"toolsListChanged":true`) {
		t.Fatalf("acknowledgement: %s", ack)
	}
	// A change of the resource, made by another request, reaches the stream.
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"touch","arguments":{"uri":"memo://board"},` + statelessMeta + `}}`
	cresp := postModern(t, p, call, "tools/call", "touch")
	io.Copy(io.Discard, cresp.Body)
	cresp.Body.Close()
	upd := next("the resource update")
	if !strings.Contains(upd, `"method":"notifications/resources/updated"`) || !strings.Contains(upd, `"uri":"memo://board"`) ||
		!strings.Contains(upd, `"io.modelcontextprotocol/subscriptionId":"L"`) {
		t.Fatalf("update: %s", upd)
	}
	go p.Stop(testTimeout)
	end := next("the graceful end")
	if !strings.Contains(end, `"id":"L","result":{"resultType":"complete"`) || !strings.Contains(end, `"io.modelcontextprotocol/subscriptionId":"L"`) {
		t.Fatalf("end of the stream: %s", end)
	}
}

// TestStatelessCancelSlowCall: a 2026-07-28 client that gives up a slow call which sends
// nothing before its answer (sleep, no progress) cancels it on the backend: the router
// turns the slow reply into a stream, sees the client close it, and cancels upstream
// (here a 2025 backend's notifications/cancelled). A 2026-07-28 reference backend is
// left out: it sends its response headers only with the answer, so the closing of the
// upstream stream reaches it only then (the fleet's own tests say so).
func TestStatelessCancelSlowCall(t *testing.T) {
	testbin.Long(t, "starts processes")
	for _, era := range []string{"legacy"} {
		t.Run(era, func(t *testing.T) {
			p := startRouterFor(t, startEraBackend(t, era))
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			c := mcpbackendtest.Connect(t, ctx, p.streamable(), "")
			before := mcpbackendtest.Stats(t, ctx, c)["cancelled"]
			callCtx, stop := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() {
				_, err := c.Session.CallTool(callCtx, &mcp.CallToolParams{Name: "sleep", Arguments: map[string]any{"ms": 20000}})
				done <- err
			}()
			testwait.For(t, "the call running on the backend", testTimeout, func() bool { return mcpbackendtest.Stats(t, ctx, c)["inFlight"] >= 1 })
			stop()
			if err := testwait.Recv(t, "the cancelled call to return", testTimeout, done); err == nil {
				t.Fatal("the cancelled call succeeded")
			}
			testwait.For(t, "the backend to cancel the call", testTimeout, func() bool {
				st := mcpbackendtest.Stats(t, ctx, c)
				return st["cancelled"] > before && st["inFlight"] == 0
			})
		})
	}
}

// TestStatelessPerClientBackend: a backend with an upstream session per client session
// serves a 2026-07-28 client (on its principal's upstream session: TestErasPerClientBackend
// in eras_test.go) and a 2025 session alike.
func TestStatelessPerClientBackend(t *testing.T) {
	testbin.Long(t, "starts processes")
	cfg := fmt.Sprintf("stateless: on\nbackends:\n  - name: b\n    prefix: \"\"\n    sessions: per-client\n    url: http://%s/mcp\n", startEraBackend(t, "legacy"))
	p := startRouter(t, "--config", writeConfig(t, cfg))
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	c := mcpbackendtest.Connect(t, ctx, p.streamable(), "")
	if _, err := c.Session.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "x"}}); err != nil {
		t.Fatalf("a 2026-07-28 client's call: %v", err)
	}
	old := mcpbackendtest.Connect(t, ctx, p.streamable(), "2025-11-25")
	if _, err := old.Session.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "x"}}); err != nil {
		t.Fatalf("a 2025 session's call: %v", err)
	}
}

// statelessMeta is a valid per-request _meta.
const statelessMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`

// TestStatelessHTTPStatuses: each error of the revision with its JSON-RPC code and HTTP
// status, the router's own and a backend's passed on, over raw HTTP.
func TestStatelessHTTPStatuses(t *testing.T) {
	testbin.Long(t, "starts processes")
	p := startRouterFor(t, startEraBackend(t, "modern"))
	type hdr = map[string]string
	std := func(method, name string) hdr {
		h := hdr{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": method}
		if name != "" {
			h["Mcp-Name"] = name
		}
		return h
	}
	cases := []struct {
		name   string
		verb   string
		h      hdr
		body   string
		status int
		code   int    // 0: a result
		data   string // a member the error's data must have
	}{
		{"discover", "POST", std("server/discover", ""),
			`{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{` + statelessMeta + `}}`, 200, 0, ""},
		{"no _meta", "POST", std("tools/list", ""),
			`{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}`, 0, 0, ""}, // claimed by its header: -32602 (no params._meta) with 400; only the status is checked
		{"no capabilities", "POST", std("tools/list", ""),
			`{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`, 400, -32602, ""},
		{"unsupported version", "POST", hdr{"MCP-Protocol-Version": "2099-01-01", "Mcp-Method": "tools/list"},
			`{"jsonrpc":"2.0","id":4,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2099-01-01","io.modelcontextprotocol/clientCapabilities":{}}}}`, 400, -32022, "supported"},
		{"header missing", "POST", hdr{"MCP-Protocol-Version": "2026-07-28"},
			`{"jsonrpc":"2.0","id":5,"method":"tools/list","params":{` + statelessMeta + `}}`, 400, -32020, ""},
		{"method header mismatch", "POST", std("prompts/list", ""),
			`{"jsonrpc":"2.0","id":6,"method":"tools/list","params":{` + statelessMeta + `}}`, 400, -32020, ""},
		{"name header mismatch", "POST", std("tools/call", "other"),
			`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"},` + statelessMeta + `}}`, 400, -32020, ""},
		{"name header in base64", "POST", std("tools/call", "=?base64?ZWNobw==?="),
			`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"},` + statelessMeta + `}}`, 200, 0, ""},
		{"capability not declared (the backend's -32021)", "POST", std("tools/call", "sample"),
			`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"sample","arguments":{"prompt":"hi"},` + statelessMeta + `}}`, 400, -32021, "requiredCapabilities"},
		{"unknown method", "POST", std("no/such", ""),
			`{"jsonrpc":"2.0","id":10,"method":"no/such","params":{` + statelessMeta + `}}`, 404, -32601, ""},
		{"removed method", "POST", std("ping", ""),
			`{"jsonrpc":"2.0","id":11,"method":"ping","params":{` + statelessMeta + `}}`, 404, -32601, ""},
		{"initialize is removed", "POST", std("initialize", ""),
			`{"jsonrpc":"2.0","id":12,"method":"initialize","params":{` + statelessMeta + `}}`, 404, -32601, ""},
		{"bad log level", "POST", std("tools/list", ""),
			`{"jsonrpc":"2.0","id":13,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/logLevel":"loud"}}}`, 400, -32602, ""},
		{"notification", "POST", std("notifications/cancelled", ""),
			`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,` + statelessMeta + `}}`, 202, 0, ""},
		{"GET", "GET", hdr{"MCP-Protocol-Version": "2026-07-28", "Accept": "text/event-stream"}, "", 405, 0, ""},
		{"DELETE", "DELETE", hdr{"MCP-Protocol-Version": "2026-07-28"}, "", 405, 0, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(tc.verb, p.url("/mcp"), strings.NewReader(tc.body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			for k, v := range tc.h {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			want := tc.status
			if want == 0 {
				want = 400
			}
			if resp.StatusCode != want {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, want, body)
			}
			if tc.verb != "POST" || tc.status == 202 || tc.status == 0 {
				return
			}
			var msg struct {
				ID     json.RawMessage `json:"id"`
				Result map[string]json.RawMessage
				Error  *struct {
					Code int
					Data map[string]json.RawMessage
				}
			}
			if err := json.Unmarshal(body, &msg); err != nil {
				t.Fatalf("%v: %s", err, body)
			}
			if !strings.Contains(tc.body, `"id":`+string(msg.ID)+`,`) {
				t.Errorf("answer id %s is not the request's", msg.ID)
			}
			if tc.code == 0 {
				if msg.Error != nil || string(msg.Result["resultType"]) != `"complete"` || !strings.Contains(string(msg.Result["_meta"]), "serverInfo") {
					t.Errorf("want a result with resultType and serverInfo: %s", body)
				}
				return
			}
			if msg.Error == nil || msg.Error.Code != tc.code {
				t.Fatalf("want error %d: %s", tc.code, body)
			}
			if tc.data != "" && msg.Error.Data[tc.data] == nil {
				t.Errorf("error data lacks %s: %s", tc.data, body)
			}
		})
	}
}

// TestStatelessDiscoverAfterReload: server/discover, built once per change of the fleet,
// follows a reconfiguration: a router started without backends does not offer what only
// a backend brings (completions, resource subscriptions); once a reload adds one it does,
// and once a reload removes it again it does not.
func TestStatelessDiscoverAfterReload(t *testing.T) {
	testbin.Long(t, "starts processes")
	addr := startEraBackend(t, "modern")
	cfg := writeConfig(t, "stateless: on\nbackends: []\n")
	p := startRouter(t, "--config", cfg)
	discover := func() string {
		t.Helper()
		resp := postModern(t, p, `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{`+statelessMeta+`}}`, "server/discover", "")
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("discover: %d %s", resp.StatusCode, body)
		}
		return string(body)
	}
	const completions = `"completions":{}`
	if first := discover(); strings.Contains(first, completions) || discover() != first {
		t.Fatalf("without backends: %s", first)
	}
	reload := func(yaml string) {
		t.Helper()
		reloadRaw(t, cfg, []byte(yaml))
		if err := p.Cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}
	reload(fmt.Sprintf("stateless: on\nbackends:\n  - name: b\n    prefix: \"\"\n    url: http://%s/mcp\n", addr))
	testwait.For(t, "discover to offer the added backend's completions", testTimeout, func() bool {
		return strings.Contains(discover(), completions)
	})
	reload("stateless: on\nbackends: []\n")
	testwait.For(t, "discover to drop the removed backend's completions", testTimeout, func() bool {
		return !strings.Contains(discover(), completions)
	})
}
