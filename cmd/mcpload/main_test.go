package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/internal/testio"
	"github.com/mcprouter/mcprouter/internal/testwait"
	"github.com/mcprouter/mcprouter/loadgen/sdktest"
)

func TestMain(m *testing.M) { sdktest.Main(m) }

func sdkURL(t *testing.T, mode sdktest.Mode) string {
	t.Helper()
	var c sdktest.Counters
	ts := sdktest.StartHTTP(sdktest.NewServer(&c, 3, 0), mode)
	t.Cleanup(ts.Close)
	return ts.URL + "/mcp"
}

// mcpload runs the command in-process and returns its exit status and output.
func mcpload(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(context.Background(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestRunAgainstSDK(t *testing.T) {
	url := sdkURL(t, sdktest.SessionSSE)
	dir := t.TempDir()
	jsonPath, htmlPath := filepath.Join(dir, "run.json"), filepath.Join(dir, "run.html")
	code, out, errOut := mcpload(t, "--url", url, "--sessions", "4", "--warmup", "200ms", "--duration", "1s",
		"--tool", "echo", "--args", `{"text":"hi {{seq}}"}`, "--json", jsonPath, "--html", htmlPath,
		"--assert", "errors==0", "--assert", "rps>0")
	if code != exitOK {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	if !strings.Contains(out, "tools/call") || !strings.Contains(errOut, "measuring") {
		t.Errorf("table or progress missing:\n%s\n%s", out, errOut)
	}
	var doc map[string]any
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	// The documented JSON shape, which scripts depend on.
	for _, k := range []string{"requests", "errors", "duration_s", "throughput_rps", "latency_us", "latency_uncorrected_us", "by_method", "series"} {
		if _, ok := doc[k]; !ok {
			t.Errorf("JSON lacks %q", k)
		}
	}
	for _, sec := range []string{"latency_us", "latency_uncorrected_us"} {
		lat, _ := doc[sec].(map[string]any)
		for _, k := range []string{"p50", "p90", "p99", "p999", "max"} {
			if _, ok := lat[k].(float64); !ok {
				t.Errorf("%s lacks %q", sec, k)
			}
		}
	}
	if doc["errors"].(float64) != 0 || doc["requests"].(float64) == 0 {
		t.Errorf("requests %v errors %v", doc["requests"], doc["errors"])
	}
	if _, err := os.Stat(htmlPath); err != nil {
		t.Error(err)
	}
}

func TestAssertSetsExitStatus(t *testing.T) {
	url := sdkURL(t, sdktest.Stateless)
	base := []string{"--url", url, "--sessions", "2", "--warmup", "0s", "--duration", "300ms", "--method", "tools/list", "--quiet"}
	tests := []struct {
		asserts []string
		want    int
	}{
		{[]string{"--assert", "errors<0.1%", "--assert", "p99<1m"}, exitOK},
		{[]string{"--assert", "errors<0.1%", "--assert", "p99<1ns"}, exitAssert},
		{[]string{"--assert", "requests>1000000000"}, exitAssert},
		{[]string{"--assert", "resources/read:p99<1s"}, exitAssert}, // never called
	}
	for _, tt := range tests {
		code, out, errOut := mcpload(t, append(base, tt.asserts...)...)
		if code != tt.want {
			t.Errorf("%v: exit %d, want %d\n%s\n%s", tt.asserts, code, tt.want, out, errOut)
		}
		if tt.want == exitAssert && !strings.Contains(out, "assert FAIL") {
			t.Errorf("%v: no FAIL line:\n%s", tt.asserts, out)
		}
	}
}

func TestUsageErrors(t *testing.T) {
	tests := [][]string{
		{}, // no URL
		{"--url", "http://127.0.0.1:1/mcp", "--assert", "p99<5"},   // no unit
		{"--url", "http://127.0.0.1:1/mcp", "--no-such-flag"},      // unknown flag
		{"--url", "http://127.0.0.1:1/mcp", "--args", "{}"},        // args without a tool
		{"--url", "http://127.0.0.1:1/mcp", "--mode", "burst"},     // unknown mode
		{"--url", "http://127.0.0.1:1/mcp", "--header", "novalue"}, // bad header
		{"--scenario", "does-not-exist.yaml"},
		{"compare", "only-one.json"},
	}
	for _, args := range tests {
		if code, _, _ := mcpload(t, args...); code != exitError {
			t.Errorf("%v: exit %d, want %d", args, code, exitError)
		}
	}
	if code, _, _ := mcpload(t, "--url", "http://127.0.0.1:1/mcp", "--duration", "100ms", "--timeout", "1s", "--quiet"); code != exitError {
		t.Errorf("run against nothing: exit %d, want %d", code, exitError)
	}
}

func TestStdioAfterDashDash(t *testing.T) {
	t.Setenv(sdktest.StdioEnv, "1") // the re-executed test binary serves stdio
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	code, out, errOut := mcpload(t, "--sessions", "2", "--warmup", "0s", "--duration", "300ms", "--quiet",
		"--tool", "echo", "--args", `{"text":"x"}`, "--assert", "errors==0", "--", exe)
	if code != exitOK || !strings.Contains(out, "stdio") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
}

func TestCompare(t *testing.T) {
	url := sdkURL(t, sdktest.Stateless)
	dir := t.TempDir()
	var files []string
	for i, sessions := range []string{"1", "3"} {
		f := filepath.Join(dir, []string{"a.json", "b.json"}[i])
		if code, out, errOut := mcpload(t, "--url", url, "--sessions", sessions, "--warmup", "0s", "--duration", "300ms",
			"--method", "ping", "--json", f, "--quiet"); code != exitOK {
			t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
		}
		files = append(files, f)
	}
	code, out, errOut := mcpload(t, "compare", files[0], files[1])
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"B/A", "throughput", "p99", "ping", "different workloads"} {
		if !strings.Contains(out, want) {
			t.Errorf("compare output lacks %q:\n%s", want, out)
		}
	}
}

func TestScenarioWithOverrides(t *testing.T) {
	url := sdkURL(t, sdktest.Stateless)
	sc := filepath.Join(t.TempDir(), "s.yaml")
	body := "target:\n  url: http://127.0.0.1:1/mcp\nsessions: 2\nwarmup: 0s\nduration: 300ms\nmix:\n  - tool: echo\n    args: {text: \"{{uuid}}\"}\n    weight: 3\n  - method: ping\nassert: [\"errors==0\"]\n"
	if err := os.WriteFile(sc, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	// The scenario's URL is dead; the flag overrides it.
	code, out, errOut := mcpload(t, "--scenario", sc, "--url", url, "--quiet")
	if code != exitOK || !strings.Contains(out, "ping") || !strings.Contains(out, "tools/call") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
}

func TestStub(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var out, errOut testio.Buffer
	done := make(chan int)
	go func() { done <- run(ctx, []string{"stub", "--listen", "127.0.0.1:0"}, &out, &errOut) }()
	re := regexp.MustCompile(`serving (\S+)`)
	var url string
	testwait.Poll(10*time.Second, func() bool {
		if m := re.FindStringSubmatch(out.String()); m != nil {
			url = m[1]
		}
		return url != ""
	})
	if url == "" {
		cancel()
		t.Fatalf("stub did not start: %s", errOut.String())
	}
	code, o, e := mcpload(t, "--url", url, "--sessions", "2", "--warmup", "0s", "--duration", "200ms", "--tool", "echo", "--quiet", "--assert", "errors==0")
	cancel()
	if code != exitOK {
		t.Errorf("exit %d\n%s\n%s", code, o, e)
	}
	select {
	case c := <-done:
		if c != exitOK {
			t.Errorf("stub exit %d", c)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("stub did not stop")
	}
}

// TestHTMLRendersInChromium opens the HTML report of a run against the SDK server in
// headless Chromium and checks, in the rendered DOM, that its three charts drew lines.
func TestHTMLRendersInChromium(t *testing.T) {
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("chromium missing in CI: .ci/deps.sh should have installed it")
		}
		t.Skip("chromium is not installed (apt-get install -y chromium); skipping the HTML rendering check")
	}
	url := sdkURL(t, sdktest.SessionJSON)
	dir := t.TempDir()
	htmlPath := filepath.Join(dir, "run.html")
	if code, out, errOut := mcpload(t, "--url", url, "--sessions", "2", "--warmup", "0s", "--duration", "2500ms", "--rate", "100",
		"--tool", "echo", "--args", `{"text":"hi"}`, "--html", htmlPath, "--quiet", "--assert", "errors==0"); code != exitOK {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, chromium, "--headless", "--no-sandbox", "--disable-gpu",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run",
		"--user-data-dir="+filepath.Join(dir, "profile"), "--dump-dom", "file://"+htmlPath)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	dom, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium: %v\n%s", err, stderr.String())
	}
	if !bytes.Contains(dom, []byte(`data-charts-rendered="3"`)) {
		t.Errorf("not every chart rendered; DOM:\n%.3000s", dom)
	}
	re := regexp.MustCompile(`id="(chart-[a-z-]+)"[^>]*data-rendered="(\d+) lines (\d+)x(\d+)"|data-rendered="(\d+) lines (\d+)x(\d+)"[^>]*id="(chart-[a-z-]+)"`)
	found := map[string]bool{}
	for _, m := range re.FindAllStringSubmatch(string(dom), -1) {
		id, w := m[1], m[3]
		if id == "" {
			id, w = m[8], m[6]
		}
		if w == "0" {
			t.Errorf("%s drew nothing", id)
		}
		found[id] = true
	}
	for _, id := range []string{"chart-latency-distribution", "chart-throughput", "chart-latency-time"} {
		if !found[id] {
			t.Errorf("chart %s missing from the rendered DOM", id)
		}
	}
}

func TestBuildConfigFanoutFlags(t *testing.T) {
	var f loadFlags
	fs := newLoadFlagSet(&f, &bytes.Buffer{})
	if err := fs.Parse([]string{"--url", "http://127.0.0.1:1/mcp", "--mode", "fanout", "--fanout-uri", "test://r/0",
		"--fanout-tool", "touch", "--fanout-args", `{"uri":"test://r/0"}`, "--fanout-rate", "5", "--header", "Authorization: Bearer x"}); err != nil {
		t.Fatal(err)
	}
	cfg, _, err := buildConfig(&f, fs)
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if cfg.Mode != "fanout" || cfg.Fanout.URI != "test://r/0" || cfg.Fanout.Rate != 5 || cfg.Fanout.Trigger.Tool != "touch" ||
		cfg.Fanout.Trigger.Method != "tools/call" || !cfg.Target.Stream || cfg.Target.Headers["Authorization"] != "Bearer x" {
		t.Errorf("config %+v", cfg)
	}
}

// A scenario keeps every field the command line left alone; a given flag wins, even
// one given with its default value.
func TestBuildConfigScenarioOverride(t *testing.T) {
	sc := filepath.Join(t.TempDir(), "s.yaml")
	body := "target:\n  url: http://127.0.0.1:1/mcp\nsessions: 7\nduration: 3s\nrate: 50\nmode: churn\nchurn_calls: 4\nslow: 5ms\n" +
		"mix:\n  - {tool: echo, label: e}\n"
	if err := os.WriteFile(sc, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	var f loadFlags
	fs := newLoadFlagSet(&f, &bytes.Buffer{})
	if err := fs.Parse([]string{"--scenario", sc, "--sessions", "3", "--duration", "10s", "--seed", "9", "--slow", "20ms"}); err != nil {
		t.Fatal(err)
	}
	cfg, _, err := buildConfig(&f, fs)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Target.URL != "http://127.0.0.1:1/mcp" || cfg.Rate != 50 || cfg.Mode != "churn" || cfg.ChurnCalls != 4 ||
		len(cfg.Mix) != 1 || cfg.Mix[0].Label != "e" {
		t.Errorf("scenario fields lost: %+v", cfg)
	}
	if cfg.Sessions != 3 || cfg.Duration != 10*time.Second || cfg.Seed != 9 || cfg.Slow != 20*time.Millisecond {
		t.Errorf("given flags not applied: %+v", cfg)
	}
}
