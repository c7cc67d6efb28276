package compare

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/internal/testbin"
)

// TestQuick runs the harness for real against mcpload stub and mcpbackend only: it builds
// the binaries, starts the servers as processes on loopback, runs mcpload closed and open
// loop, runs the codec benchmarks once and renders the section. It checks that everything
// is wired, not the figures (no timing assertions: the machine is shared).
func TestQuick(t *testing.T) {
	testbin.Long(t, "builds binaries and runs real load")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	reports := t.TempDir()
	res, err := Run(ctx, Options{
		Quick:          true,
		Targets:        []string{TargetStub, TargetDirect},
		Duration:       time.Second,
		Warmup:         500 * time.Millisecond,
		Sessions:       4,
		CodecBenchtime: "1x",
		CodecCount:     1,
		ReportsDir:     reports,
		Log:            testLog{t},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Warnings) > 0 {
		t.Errorf("warnings: %q", res.Warnings)
	}
	if len(res.Closed) != 2 {
		t.Fatalf("%d closed-loop targets, want 2", len(res.Closed))
	}
	for _, tr := range res.Closed {
		if !tr.Measured() || tr.Throughput() <= 0 || tr.Errors() != 0 {
			t.Errorf("%s: measured %v, throughput %v, errors %d", tr.Name, tr.Measured(), tr.Throughput(), tr.Errors())
			continue
		}
		if _, err := os.Stat(filepath.Join(reports, tr.ReportHTML)); err != nil {
			t.Errorf("%s: %v", tr.Name, err)
		}
		if _, err := os.Stat(filepath.Join(reports, tr.ReportJSON)); err != nil {
			t.Errorf("%s: %v", tr.Name, err)
		}
	}
	// Open loop: only the set based on direct (the router was not selected), with direct.
	if len(res.Open) != 1 || res.Open[0].Basis != TargetDirect || len(res.Open[0].Targets) != 1 || !res.Open[0].Targets[0].Measured() {
		t.Errorf("open-loop sets: %+v", res.Open)
	} else if r := res.Open[0].Targets[0].Runs[0].Report; r.Config.Pacing != "open" || r.Config.Sessions != 16 {
		t.Errorf("open-loop run: pacing %q sessions %d, want open with 16 (4 x 4)", r.Config.Pacing, r.Config.Sessions)
	}
	if len(res.Codec) == 0 {
		t.Error("no codec benchmark rows")
	}
	if res.Machine.GoVersion == "" || res.Machine.CPUs == 0 {
		t.Errorf("machine %+v", res.Machine)
	}
	md := res.Markdown("reports")
	for _, want := range []string{SectionHeading + "\n", "### Closed loop, 4 sessions", "| direct | mcpbackend alone |",
		"### Open loop at 50% of the direct maximum", "### mcpload's own cost", "### Codec envelope micro-benchmarks",
		"`reports/direct.html`", "mcpload stub --listen 127.0.0.1:0"} {
		if !strings.Contains(md, want) {
			t.Errorf("section lacks %q", want)
		}
	}
	if strings.Contains(md, os.TempDir()) {
		t.Errorf("section names a local temporary path:\n%s", md)
	}
	// The work directory was temporary and is gone.
	if _, err := os.Stat(res.Options.WorkDir); !os.IsNotExist(err) {
		t.Errorf("work directory %s left behind (%v)", res.Options.WorkDir, err)
	}
}

type testLog struct{ t *testing.T }

func (l testLog) Write(b []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}
