package cluster

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestMainOutline: exit codes and the working directory: a pass writes the section and removes
// the directory, a failed check keeps it, an error answers 2.
func TestMainOutline(t *testing.T) {
	logf := func(string, ...any) {}
	out := filepath.Join(t.TempDir(), "RESULTS.md")
	var seen string
	run := func(r Report, err error) func(context.Context, string) (Report, error) {
		return func(_ context.Context, dir string) (Report, error) { seen = dir; return r, err }
	}
	pass := Report{Summary: "figures", Checks: Checks{{What: "ok", Pass: true}}, Command: "go run ./x"}
	if code := Main("x", Place{Out: out}, logf, run(pass, nil)); code != 0 {
		t.Fatalf("pass: exit %d", code)
	}
	if _, err := os.Stat(seen); !os.IsNotExist(err) {
		t.Fatalf("pass: %s kept (%v)", seen, err)
	}
	if doc, _ := os.ReadFile(out); !strings.Contains(string(doc), "## x\n\n`go run ./x` (") || !strings.Contains(string(doc), "figures\n\n| check") {
		t.Fatalf("pass: results file is %q", doc)
	}
	dir := t.TempDir()
	if code := Main("x", Place{Dir: dir}, logf, run(Report{Checks: Checks{{What: "bad"}}}, nil)); code != 1 {
		t.Fatalf("fail: exit %d", code)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("fail: %s not kept: %v", dir, err)
	}
	if code := Main("x", Place{Dir: dir}, logf, run(Report{}, errors.New("boom"))); code != 2 {
		t.Fatalf("error: exit %d", code)
	}
}

// TestReportSection: the section names the run, quotes its command with the day, and
// holds the table.
func TestReportSection(t *testing.T) {
	r := Report{Summary: "capacity 1 call/s", Checks: Checks{{What: "a", Figure: "1", Pass: true}}, Command: "go run ./bench/cmd/x -duration 1m"}
	got := r.Section("x", time.Date(2026, 7, 28, 12, 0, 0, 0, time.UTC))
	want := "## x\n\n`go run ./bench/cmd/x -duration 1m` (2026-07-28):\n\ncapacity 1 call/s\n\n"
	if !strings.HasPrefix(got, want) || !strings.HasSuffix(got, "| PASS     |\n") {
		t.Fatalf("section:\n%s", got)
	}
}
