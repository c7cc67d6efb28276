// Package golden compares what a test produced with a golden file under its package's
// testdata folder, or rewrites that file when the test binary runs with -update. It is
// the one golden-file helper of the project's tests (and the one -update flag: a test
// package that imports it must not define its own).
package golden

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata instead of comparing with them")

// Check compares got with the golden file at path. With -update it writes got there
// (creating the folder) and passes: check the rewritten files in the diff before
// committing them.
func Check(t testing.TB, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s differs from the golden file (-want +got; run with -update after checking):\n%s", path, diff)
	}
}

// Input is one test input file: where it is and what it holds.
type Input struct {
	Path string
	Data []byte
}

// Inputs reads every file that matches pattern (as filepath.Glob), in name order: the
// inputs of golden tests and the seeds of fuzz targets. No file at all fails the test,
// which would otherwise pass having tested nothing.
func Inputs(tb testing.TB, pattern string) []Input {
	tb.Helper()
	paths, err := filepath.Glob(pattern)
	if err != nil || len(paths) == 0 {
		tb.Fatalf("no test input matches %s (%v)", pattern, err)
	}
	ins := make([]Input, len(paths))
	for i, p := range paths {
		ins[i] = Input{Path: p, Data: Read(tb, p)}
	}
	return ins
}

// Read returns what the test input file at path holds, failing the test if it cannot
// be read.
func Read(tb testing.TB, path string) []byte {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}
