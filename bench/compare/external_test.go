package compare

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestFloorGoals checks the issue-15 goals on hand-made runs: router against haproxy
// (calls/s, CPU per call of the proxy process, open-loop p99), the bare fasthttp relay
// against haproxy (the reference rows) and router over stdio against the stdio bridges.
func TestFloorGoals(t *testing.T) {
	res := fakeResult()
	ms := time.Millisecond
	tr := func(name string, runs ...LoadRun) *TargetResult {
		s := targetByName(name)
		return &TargetResult{Name: name, Label: s.label, Family: s.family, Servers: s.servers, Runs: runs}
	}
	// Router runs (fakeResult): 30000/s and 20000/s, router CPU 3000 and 3200 ms over
	// 100000 ops: 30 and 32 µs per op.
	res.Closed = append(res.Closed,
		tr(TargetHAProxy, fakeRun(1, 25000, 500, 1000, 2000*ms, 1500*ms), fakeRun(2, 40000, 500, 1000, 1600*ms, 1500*ms)),
		tr(TargetFastRelay, fakeRun(1, 27000, 500, 1000, 2200*ms, 1500*ms), fakeRun(2, 36000, 500, 1000, 1760*ms, 1500*ms)),
		tr(TargetRouterStdio, fakeRun(1, 18000, 500, 1000, 2500*ms), fakeRun(2, 16000, 500, 1000, 2700*ms)),
		tr(TargetSupergateway, fakeRun(1, 1500, 500, 1000, 60000*ms), fakeRun(2, 1600, 500, 1000, 58000*ms)),
		tr(TargetMCPProxy, fakeRun(1, 3000, 500, 1000, 50000*ms), fakeRun(2, 2000, 500, 1000, 54000*ms)))
	res.Open = append(res.Open, &OpenSet{Key: "open-eq", Basis: TargetRouter, Rate: 12500, Targets: []*TargetResult{
		tr(TargetRouter, fakeRun(1, 12500, 300, 900, 3000*ms, 1500*ms), fakeRun(2, 12500, 300, 1500, 3000*ms, 1500*ms)),
		tr(TargetHAProxy, fakeRun(1, 12500, 300, 850, 2000*ms, 1500*ms), fakeRun(2, 12500, 300, 1000, 2000*ms, 1500*ms)),
		tr(TargetFastRelay, fakeRun(1, 12500, 300, 870, 2100*ms, 1500*ms), fakeRun(2, 12500, 300, 1040, 2100*ms, 1500*ms)),
	}})
	checkGoals(t, goalsByName(res), []goalWant{
		// 30000/25000 = 1.2, 20000/40000 = 0.5.
		{"mcprouter -> mcpbackend vs haproxy -> mcpbackend (throughput)", 0.85, false},
		// 30/20 = 1.5, 32/16 = 2.
		{"mcprouter's CPU per forwarded call vs haproxy's (the proxy process alone)", 1.75, false},
		// 18000/3000 = 6, 16000/2000 = 8.
		{"mcprouter -> mcpbackend stdio vs the faster stdio bridge (throughput)", 7, true},
		// 25/500 = 0.05, 27/540 = 0.05.
		{"mcprouter -> mcpbackend stdio: CPU per call (with the child) vs the cheaper stdio bridge's (with its children)", 0.05, true},
		// 900-850 = 50, 1500-1000 = 500.
		{"open loop at 50% of the router's maximum: p99 the router adds over direct minus the p99 haproxy adds", 275, false},
		// 22/20 = 1.1 in both rounds.
		{"reference, the floor on fasthttp: the bare relay's CPU per forwarded call vs haproxy's", 1.1, false},
		// 870-850 = 20, 1040-1000 = 40.
		{"reference, the floor on fasthttp: open loop at 50% of the router's maximum, p99 the bare relay adds minus the p99 haproxy adds", 30, true},
	})
}

// TestProxyConfigs checks the generated configurations with the programs themselves
// where they are installed (haproxy -c, nginx -t).
func TestProxyConfigs(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		prog, text string
		args       func(cfg string) []string
	}{
		{"haproxy", haproxyConfig("127.0.0.1:1", "127.0.0.1:2"), func(cfg string) []string { return []string{"-c", "-f", cfg} }},
		{"nginx", nginxConfig("127.0.0.1:1", "127.0.0.1:2"), func(cfg string) []string { return []string{"-t", "-p", dir, "-e", "stderr", "-c", cfg} }},
	} {
		if !strings.Contains(tc.text, "127.0.0.1:1") || !strings.Contains(tc.text, "127.0.0.1:2") {
			t.Errorf("%s: addresses missing:\n%s", tc.prog, tc.text)
		}
		prog, err := exec.LookPath(tc.prog)
		if err != nil {
			if prog, err = exec.LookPath(filepath.Join("/usr/sbin", tc.prog)); err != nil {
				t.Logf("%s not installed: configuration not checked by it", tc.prog)
				continue
			}
		}
		cfg := filepath.Join(dir, tc.prog+".conf")
		if err := os.WriteFile(cfg, []byte(tc.text), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(prog, tc.args(cfg)...).CombinedOutput(); err != nil {
			t.Errorf("%s rejects its configuration: %v\n%s", tc.prog, err, out)
		}
	}
}

func TestRouterConfigStdio(t *testing.T) {
	cfg := routerConfig(srvRouterStdio, "bin/mcpbackend", false)
	if !strings.Contains(cfg, `command: ["bin/mcpbackend", stdio]`) || strings.Contains(cfg, "url:") {
		t.Errorf("stdio router configuration:\n%s", cfg)
	}
	if cfg := routerConfig(srvRouterPipe, "http://127.0.0.1:1/mcp", false); !strings.Contains(cfg, "url: http://127.0.0.1:1/mcp\n    pipeline: 2\n") {
		t.Errorf("pipelined router configuration:\n%s", cfg)
	}
}
