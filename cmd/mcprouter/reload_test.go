package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcprouter/mcprouter/internal/testbin"
	"github.com/mcprouter/mcprouter/internal/testwait"
	"github.com/mcprouter/mcprouter/loadgen/report"
)

// reloadConfig writes a router configuration with the named stdio backends to path the
// way editors and orchestrators do: a new file renamed over the old one. A name may end
// in @timeout (default 20s); extra is appended as is.
func reloadConfig(t *testing.T, path string, backends []string, extra string) {
	t.Helper()
	var b strings.Builder
	b.WriteString("admin:\n  listen: 127.0.0.1:0\nhealth:\n  interval: 200ms\nreload:\n  watch: true\n  debounce: 50ms\n")
	b.WriteString(extra)
	b.WriteString("backends:\n")
	for _, name := range backends {
		name, timeout, ok := strings.Cut(name, "@")
		if !ok {
			timeout = "20s"
		}
		fmt.Fprintf(&b, "  - name: %s\n    command: [%q, stdio]\n    timeout: %s\n", name, backendBin(t), timeout)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// readyz returns the admin /readyz status and body.
func readyz(t *testing.T, admin string) (int, string) {
	t.Helper()
	c := http.Client{Timeout: testTimeout}
	resp, err := c.Get(admin + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestReloadUnderLoad: a client calls a backend that stays in a loop while the
// configuration file is rewritten (a backend added, another removed, a setting that
// needs a restart changed; later the called backend itself changed, so replaced): no
// call to the backend that stays fails, the removed
// backend's call in flight completes, the client hears list_changed and sees the new
// tools and not the old ones. Then a configuration that does not validate (SIGHUP) is
// refused: logged, shown in /readyz's body with readiness kept, the old configuration
// still serving; the next good one clears it. The reloads are counted in /metrics.
func TestReloadUnderLoad(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mcprouter.yaml")
	reloadConfig(t, path, []string{"keep", "gone"}, "")
	p := startRouter(t, "--config", path)
	admin := adminURL(t, p)

	changed := make(chan struct{}, 16)
	progress := make(chan struct{}, 64)
	ctx, cancel := context.WithTimeout(context.Background(), 2*testTimeout)
	defer cancel()
	cs := connectSDK(t, ctx, p, "reload", &mcp.ClientOptions{
		ToolListChangedHandler:      func(context.Context, *mcp.ToolListChangedRequest) { offer(changed, struct{}{}) },
		ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) { offer(progress, struct{}{}) },
	})
	if names, _ := toolNames(t, cs); !slices.Contains(names, "keep__echo") || !slices.Contains(names, "gone__echo") {
		t.Fatalf("tools before the reload: %v\n%s", names, p.Log)
	}

	// The load: four callers of the backend that stays, until told to stop (and at
	// most maxCalls calls each).
	const maxCalls = 5000
	var calls, failed atomic.Int64
	var firstErr atomic.Value
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < maxCalls; i++ {
				select {
				case <-stop:
					return
				default:
				}
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "keep__echo", Arguments: map[string]any{"text": "x"}})
				calls.Add(1)
				if err != nil || res.IsError {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, fmt.Sprint(err, res))
				}
			}
		}()
	}
	stopLoad := func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		wg.Wait()
	}
	defer stopLoad()

	// A call to the backend about to be removed, in flight across the reload.
	inflight := progressCall(ctx, cs, "gone__progress", "reload", 6)
	testwait.Recv(t, "progress of the call in flight", testTimeout, progress)

	// The new configuration: gone removed, added added, and a setting only a restart
	// changes.
	reloadConfig(t, path, []string{"keep", "added"}, "sessions:\n  max: 77\n")
	testwait.Recv(t, "list_changed after the reload", testTimeout, changed)
	testwait.For(t, "the added backend's tools, the removed one's gone", testTimeout, func() bool {
		names, _ := toolNames(t, cs)
		return slices.Contains(names, "added__echo") && !slices.Contains(names, "gone__echo") &&
			slices.Contains(names, "keep__echo")
	})
	o := testwait.Recv(t, "the removed backend's call in flight", testTimeout, inflight)
	if o.err != nil || o.res.IsError {
		t.Fatalf("the call in flight on the removed backend failed: %v %+v\n%s", o.err, o.res, p.Log)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "added__echo", Arguments: map[string]any{"text": "new"}})
	if err != nil || res.IsError {
		t.Fatalf("call to the added backend: %v %+v\n%s", err, res, p.Log)
	}
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "gone__echo", Arguments: map[string]any{"text": "x"}}); err == nil && !res.IsError {
		t.Fatalf("the removed backend still answers: %+v", res)
	}
	testwait.For(t, "the removed backend drained and closed", testTimeout, func() bool {
		return p.Log.Contains("backend removed: drained and closed")
	})
	if !p.Log.Contains("settings=sessions") {
		t.Errorf("the restart-only setting was not named in the log\n%s", p.Log)
	}

	// A configuration that does not validate, asked for by SIGHUP: refused, shown in
	// /readyz with readiness kept, and the old configuration still serves.
	reloadRaw(t, path, []byte("backends:\n  - name: x\n    url: ftp://nowhere\n"))
	if err := p.Cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, "the refused reload in /readyz", testTimeout, func() bool {
		code, body := readyz(t, admin)
		return code == http.StatusOK && strings.Contains(body, "reload refused") && strings.Contains(body, "ftp://nowhere")
	})
	testwait.For(t, "the SIGHUP reload refused too", testTimeout, func() bool {
		return p.Log.Contains("trigger=SIGHUP")
	})
	if !p.Log.Contains("configuration reload refused") {
		t.Errorf("the refusal was not logged\n%s", p.Log)
	}
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "added__echo", Arguments: map[string]any{"text": "still"}}); err != nil || res.IsError {
		t.Fatalf("the running configuration stopped serving after a refused reload: %v %+v\n%s", err, res, p.Log)
	}
	// The next good configuration clears it; it changes the backend under load, which
	// is replaced without a failed call.
	reloadConfig(t, path, []string{"keep@21s", "added"}, "")
	testwait.For(t, "readyz cleared by the next good reload", testTimeout, func() bool {
		code, body := readyz(t, admin)
		return code == http.StatusOK && !strings.Contains(body, "refused")
	})
	testwait.For(t, "the changed backend replaced and the old one drained", testTimeout, func() bool {
		return p.Log.Contains("backends_replaced=[keep]") && p.Log.Count("backend removed: drained and closed") >= 2
	})

	stopLoad()
	if calls.Load() == 0 || failed.Load() != 0 {
		t.Fatalf("calls to the backend that stayed: %d, %d failed (first: %v)\n%s", calls.Load(), failed.Load(), firstErr.Load(), p.Log)
	}
	if v := gaugeValue(t, admin+"/metrics", `mcprouter_config_reloads_total{outcome="success"}`); v < 2 {
		t.Errorf("successful reloads counted: %v, want at least 2", v)
	}
	if v := gaugeValue(t, admin+"/metrics", `mcprouter_config_reloads_total{outcome="failure"}`); v < 1 {
		t.Errorf("refused reloads counted: %v, want at least 1", v)
	}
	if v := gaugeValue(t, admin+"/metrics", `mcprouter_requests_total{backend="added",method="tools/call",outcome="ok"}`); v < 1 {
		t.Errorf("calls to the added backend counted under its name: %v, want at least 1", v)
	}
	t.Logf("%d calls to the backend that stayed during the reloads, none failed", calls.Load())
}

// reloadRaw puts data at path by a rename, like reloadConfig.
func reloadRaw(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path+".tmp", data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
}

// TestReloadPolicy: the policy's rules and limits change with a reload. A new rate
// limit applies at once, and says nothing to clients (their lists did not change); a
// rule that hid a tool, once removed, shows it, and the client hears list_changed
// (issue 14). Notifications keep their order on the client's stream, so the one
// list_changed heard after the second reload is also the only one sent.
func TestReloadPolicy(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mcprouter.yaml")
	hidden := "policy:\n  rules:\n    - allow: 'true'\n    - deny: 'mcp.tool == \"keep__fail\"'\n"
	reloadConfig(t, path, []string{"keep"}, hidden)
	p := startRouter(t, "--config", path)

	changed := make(chan struct{}, 16)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	cs := connectSDK(t, ctx, p, "reload-policy", &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	})
	if names, _ := toolNames(t, cs); !slices.Contains(names, "keep__echo") || slices.Contains(names, "keep__fail") {
		t.Fatalf("tools under the first policy: %v", names)
	}
	echo := func() (*mcp.CallToolResult, error) {
		return cs.CallTool(ctx, &mcp.CallToolParams{Name: "keep__echo", Arguments: map[string]any{"text": "x"}})
	}

	// A limit added: one keep__echo an hour.
	reloadConfig(t, path, []string{"keep"}, hidden+"  limits:\n    - match: 'mcp.tool == \"keep__echo\"'\n      rate: 1\n      per: 1h\n      burst: 1\n")
	testwait.For(t, "the first reload", testTimeout, func() bool { return p.Log.Count("configuration reloaded") >= 1 })
	if res, err := echo(); err != nil || res.IsError {
		t.Fatalf("the call within the new limit: %v %+v\n%s", err, res, p.Log)
	}
	if res, err := echo(); err == nil && !res.IsError {
		t.Fatalf("the call past the new limit went through: %+v", res)
	} else if err != nil && !strings.Contains(err.Error(), "Too Many Requests") {
		t.Fatalf("the call past the new limit: %v, want 429", err)
	}

	// The rule that hid keep__fail removed (and the limit with it).
	reloadConfig(t, path, []string{"keep"}, "policy:\n  rules:\n    - allow: 'true'\n")
	testwait.Recv(t, "list_changed after the rule went", testTimeout, changed)
	if n := len(changed); n != 0 {
		t.Errorf("%d more list_changed, want only the one of the view that changed", n)
	}
	if names, _ := toolNames(t, cs); !slices.Contains(names, "keep__fail") {
		t.Fatalf("keep__fail still hidden after the reload: %v", names)
	}
	if res, err := echo(); err != nil || res.IsError {
		t.Fatalf("the limit outlived its reload: %v %+v", err, res)
	}
}

// TestReloadFromEmpty: a configuration with no backends is valid (`mcprouter check`
// passes it, the router starts and says its lists are empty until a reload); a reload
// that adds a backend gives its tools to a client already connected, which hears
// list_changed, lists them and calls one.
func TestReloadFromEmpty(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mcprouter.yaml")
	reloadConfig(t, path, nil, "")
	var out, errOut strings.Builder
	if code := check([]string{"--config", path}, &out, &errOut); code != 0 {
		t.Fatalf("mcprouter check of a configuration without backends: exit %d\n%s%s", code, out.String(), errOut.String())
	}
	p := startRouter(t, "--config", path)
	if !p.Log.Contains("no backends configured") {
		t.Errorf("the start did not say the lists are empty until a reload\n%s", p.Log)
	}

	changed := make(chan struct{}, 16)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	cs := connectSDK(t, ctx, p, "reload-empty", &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { offer(changed, struct{}{}) },
	})
	if caps := cs.InitializeResult().Capabilities; caps.Tools == nil || !caps.Tools.ListChanged {
		t.Fatalf("an empty router does not offer tools with listChanged: %+v", caps)
	}
	if names, _ := toolNames(t, cs); len(names) != 0 {
		t.Fatalf("tools of an empty router: %v", names)
	}

	reloadConfig(t, path, []string{"one"}, "")
	testwait.Recv(t, "list_changed after the first backend came", testTimeout, changed)
	testwait.For(t, "the added backend's tools", testTimeout, func() bool {
		names, _ := toolNames(t, cs)
		return slices.Contains(names, "one__echo")
	})
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "one__echo", Arguments: map[string]any{"text": "first"}})
	if err != nil || res.IsError {
		t.Fatalf("call to the backend a reload added: %v %+v\n%s", err, res, p.Log)
	}
}

// TestReloadUnderMcpload: the real load generator (mcpload, 4 sessions calling a tool
// in a closed loop) runs against the router while reloads add a backend, remove
// another, then replace the one it calls; its JSON report counts no failed call.
func TestReloadUnderMcpload(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "mcprouter.yaml")
	reloadConfig(t, path, []string{"keep", "gone"}, "")
	p := startRouter(t, "--config", path)
	admin := adminURL(t, p)
	okCalls := func() float64 {
		return gaugeValue(t, admin+"/metrics", `mcprouter_requests_total{backend="keep",method="tools/call",outcome="ok"}`)
	}

	jsonOut := filepath.Join(dir, "report.json")
	load := testbin.Start(t, testbin.Spec{Name: "mcpload", Bin: testbin.BuildFixture(t, "github.com/mcprouter/mcprouter/cmd/mcpload"),
		Args: []string{"--url", p.url("/mcp"), "--tool", "keep__echo", "--args", `{"text":"x"}`, "--sessions", "4",
			"--warmup", "0s", "--duration", "5m", "--timeout", "20s", "--json", jsonOut, "--quiet"}})
	testwait.For(t, "mcpload's first calls", testTimeout, func() bool { return okCalls() > 0 })

	reloadConfig(t, path, []string{"keep", "added"}, "")
	testwait.For(t, "gone removed and drained", testTimeout, func() bool {
		return p.Log.Contains("backend removed: drained and closed")
	})
	reloadConfig(t, path, []string{"keep@21s", "added"}, "")
	testwait.For(t, "keep replaced and the old one drained", testTimeout, func() bool {
		return p.Log.Contains("backends_replaced=[keep]") && p.Log.Count("backend removed: drained and closed") >= 2
	})
	after := okCalls()
	testwait.For(t, "calls served by keep's replacement", testTimeout, func() bool { return okCalls() > after })

	// Interrupted, mcpload ends its run as at the end of its duration and writes the
	// report.
	if err := load.Cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if !load.WaitExit(testTimeout) {
		t.Fatalf("mcpload did not end on SIGINT\n%s", load.Log)
	}
	raw, err := os.ReadFile(jsonOut)
	if err != nil {
		t.Fatalf("mcpload's report: %v\n%s", err, load.Log)
	}
	var rep report.Report
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatalf("mcpload's report: %v", err)
	}
	if rep.Requests == 0 || rep.Errors != 0 {
		t.Fatalf("mcpload: %d calls, %d failed (%v, first: %v)\n%s", rep.Requests, rep.Errors, rep.ErrorsByClass, rep.FirstErrors, p.Log)
	}
	t.Logf("mcpload: %d calls in %.1fs across two reloads (%.0f/s), none failed; p99 %.0fµs",
		rep.Requests, rep.DurationS, rep.ThroughputRPS, rep.Latency.P99)
}

// TestReloadMovesSubscriptions: a client subscribed to a backend's resource keeps its
// subscription when a reload replaces the backend (one upstream subscription, now on
// the replacement, whose updates reach the client), and loses it when a reload removes
// the backend, even for another that serves the same URI: no upstream subscription is
// left.
func TestReloadMovesSubscriptions(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mcprouter.yaml")
	reloadConfig(t, path, []string{"keep"}, "")
	p := startRouter(t, "--config", path)
	admin := adminURL(t, p)
	held := func() float64 { return gaugeValue(t, admin+"/metrics", "mcprouter_upstream_subscriptions") }

	updated := make(chan string, 16)
	ctx, cancel := context.WithTimeout(context.Background(), 2*testTimeout)
	defer cancel()
	cs := connectSDK(t, ctx, p, "reload-subs", &mcp.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) { offer(updated, r.Params.URI) },
	})
	if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "memo://board"}); err != nil {
		t.Fatalf("subscribe: %v\n%s", err, p.Log)
	}
	if n := held(); n != 1 {
		t.Fatalf("%v upstream subscriptions, want 1", n)
	}
	touch := func() {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "keep__touch", Arguments: map[string]any{"uri": "memo://board"}})
		if err != nil || res.IsError {
			t.Fatalf("touch: %v %+v\n%s", err, res, p.Log)
		}
	}

	reloadConfig(t, path, []string{"keep@21s"}, "")
	testwait.For(t, "keep replaced and the old one drained", testTimeout, func() bool {
		return p.Log.Contains("backends_replaced=[keep]") && p.Log.Contains("backend removed: drained and closed")
	})
	testwait.For(t, "the subscription held on the replacement", testTimeout, func() bool { return held() == 1 })
	touch()
	if uri := testwait.Recv(t, "the replacement's update", testTimeout, updated); uri != "memo://board" {
		t.Fatalf("update for %q, want memo://board", uri)
	}

	// keep goes, other comes: other serves the same resource, but the subscription
	// does not move to another backend (the policy admitted it for keep's name).
	reloadConfig(t, path, []string{"other"}, "")
	testwait.For(t, "keep removed and drained", testTimeout, func() bool {
		return p.Log.Count("backend removed: drained and closed") >= 2
	})
	if n := held(); n != 0 {
		t.Fatalf("%v upstream subscriptions left after the backend went, want none", n)
	}
}
