package cluster

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMainOutline: exit codes and the working directory: a pass writes the section and removes
// the directory, a failed check keeps it, an error answers 2.
func TestMainOutline(t *testing.T) {
	logf := func(string, ...any) {}
	out := filepath.Join(t.TempDir(), "RESULTS.md")
	var seen string
	run := func(o Outcome, err error) func(context.Context, string) (Outcome, error) {
		return func(_ context.Context, dir string) (Outcome, error) { seen = dir; return o, err }
	}
	if code := Main("x", "", false, out, logf, run(Outcome{Table: "t\n", Section: "## x\n\nok\n", Passed: true}, nil)); code != 0 {
		t.Fatalf("pass: exit %d", code)
	}
	if _, err := os.Stat(seen); !os.IsNotExist(err) {
		t.Fatalf("pass: %s kept (%v)", seen, err)
	}
	if doc, _ := os.ReadFile(out); !strings.Contains(string(doc), "## x\n\nok\n") {
		t.Fatalf("pass: results file is %q", doc)
	}
	dir := t.TempDir()
	if code := Main("x", dir, false, "", logf, run(Outcome{Passed: false}, nil)); code != 1 {
		t.Fatalf("fail: exit %d", code)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("fail: %s not kept: %v", dir, err)
	}
	if code := Main("x", dir, false, "", logf, run(Outcome{}, errors.New("boom"))); code != 2 {
		t.Fatalf("error: exit %d", code)
	}
}
