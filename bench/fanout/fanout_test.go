package fanout

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/internal/testbin"
)

// childEnv makes the test binary a server process for TestSmokeChild.
const childEnv = "FANOUT_TEST_SERVE"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		if err := ServeChild(ServerConfig{Sessions: 16}, os.Stdin, os.Stdout); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// smokeOptions is a run small enough for CI: 10 sessions, 2 updates.
func smokeOptions(t *testing.T) Options {
	return Options{
		Sessions: []int{1, 10}, Updates: 2, Concurrency: 4, Timeout: 20 * time.Second, Gap: -1,
		Logf: t.Logf,
	}
}

// runChecked runs the harness against target (within two minutes) and checks its
// report.
func runChecked(t *testing.T, target Target, opts Options) *Report {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rep, err := Run(ctx, target, opts)
	if err != nil {
		t.Fatal(err)
	}
	checkReport(t, rep, target, opts)
	return rep
}

// checkReport: every update reached every receiver on every side, once.
func checkReport(t *testing.T, rep *Report, target Target, opts Options) {
	t.Helper()
	if len(rep.Sizes) != len(opts.Sessions) {
		t.Fatalf("%d sizes measured, want %d", len(rep.Sizes), len(opts.Sessions))
	}
	for i, s := range rep.Sizes {
		n := opts.Sessions[i]
		for side, r := range map[string]Result{"router": s.Router, "nats": s.NATS, "floor": s.Floor} {
			if r.Receivers != n || r.Updates != opts.Updates || r.Deliveries != n*opts.Updates || r.Misses != 0 {
				t.Errorf("%d sessions, %s: %+v", n, side, r)
			}
			if r.P50 <= 0 || r.P99 < r.P50 || r.Max < r.P99 || r.PerSec <= 0 {
				t.Errorf("%d sessions, %s: inconsistent figures %+v", n, side, r)
			}
		}
		if s.Router.SendRTT <= 0 {
			t.Errorf("%d sessions: no touch round trip", n)
		}
	}
	if rep.Stray != 0 || rep.StreamErrors != 0 {
		t.Errorf("stray deliveries %d, stream errors %d", rep.Stray, rep.StreamErrors)
	}
	// Every delivery to a session went through the routers' fan-out: warm-up included,
	// and the first size's session gets the second size's updates too.
	var want uint64
	for _, n := range opts.Sessions {
		want += uint64(n * (opts.Updates + 1))
	}
	if rep.Server.FanOut != want || rep.Server.SlowConsumers != 0 {
		t.Errorf("router counters %+v, want fan-out %d", rep.Server, want)
	}
	up := 0
	for _, u := range rep.Server.Upstream {
		up += u
	}
	if up != 1 {
		t.Errorf("upstream subscriptions %v, want exactly one in the cluster", rep.Server.Upstream)
	}
	md := rep.Markdown(Environment{Command: "go run ./bench/cmd/fanout", Machine: "test", Servers: "test", Persist: true})
	if !strings.Contains(md, "| 10 |") {
		t.Errorf("markdown lacks the 10-session row:\n%s", md)
	}
}

// TestSmoke runs the whole harness with the servers in this process.
func TestSmoke(t *testing.T) {
	srv, err := StartServers(ServerConfig{Sessions: 16})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	opts := smokeOptions(t)
	rep := runChecked(t, srv, opts)
	if !rep.InProcess || rep.Sizes[1].Router.ClientCPU != 0 {
		t.Errorf("in-process run should report one CPU figure: %+v", rep.Sizes[1].Router)
	}
	if err := srv.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
}

// TestSmokeChild runs the harness against servers in a child process (this test binary,
// through TestMain), the way the command does past the file limit.
func TestSmokeChild(t *testing.T) {
	testbin.Long(t, "starts a child process")
	c, err := Spawn([]string{os.Args[0], "-test.run=^$"}, []string{childEnv + "=1"}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	opts := smokeOptions(t)
	opts.Sessions = []int{10}
	dir := t.TempDir()
	opts.CPUProfile = dir + "/servers.prof"
	opts.ClientCPUProfile = dir + "/clients.prof"
	rep := runChecked(t, c, opts)
	if rep.InProcess {
		t.Error("child run reported in-process")
	}
	for _, p := range []string{opts.CPUProfile, opts.ClientCPUProfile} {
		if st, err := os.Stat(p); err != nil || st.Size() == 0 {
			t.Errorf("profile %s: %v", p, err)
		}
	}
	if err := c.Close(); err != nil {
		t.Errorf("child exit: %v", err)
	}
}
