package testbin

import (
	"os"
	"path/filepath"
	"testing"
)

// RouterConfig writes yaml to a router configuration file, mcprouter.yaml in a
// directory of the test's own, and returns its path; the file goes with the directory
// when the test ends.
func RouterConfig(tb testing.TB, yaml string) string {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "mcprouter.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		tb.Fatal(err)
	}
	return path
}

// StartRouter builds the router (Build: with the race detector when the tests have it)
// and starts it with args, ready once it logged that it listens; Proc.Addr is its
// address. Like every Start, it is killed at cleanup if still running.
func StartRouter(tb testing.TB, args ...string) *Proc {
	tb.Helper()
	return Start(tb, Spec{Name: "mcprouter", Bin: Build(tb, Router), Args: args, Ready: []string{"mcprouter listening"}})
}
