package testbin

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// Node finds Node 22 and the npm packages named (as npm names them) where .ci/deps.sh
// installs them: in $MCPROUTER_NODE_DIR, or .cache/node at the root of the module. It
// returns the node binary and the packages' directories. When any of them is missing
// the test skips outside CI and fails in CI, so that a broken install cannot pass
// silently.
func Node(tb testing.TB, pkgs ...string) (bin string, dirs []string) {
	tb.Helper()
	dir := os.Getenv("MCPROUTER_NODE_DIR")
	if dir == "" {
		root, err := moduleRoot()
		if err != nil {
			tb.Fatal(err)
		}
		dir = filepath.Join(root, ".cache", "node")
	}
	bin = filepath.Join(dir, "node_modules", ".bin", "node")
	for _, p := range pkgs {
		dirs = append(dirs, filepath.Join(dir, "node_modules", filepath.FromSlash(p)))
	}
	for _, p := range append([]string{bin}, dirs...) {
		if _, err := os.Stat(p); err != nil {
			if os.Getenv("CI") != "" {
				tb.Fatalf("%s missing: .ci/deps.sh should have installed it", p)
			}
			tb.Skipf("Node or an npm package the test drives is not installed (bash .ci/deps.sh): %v", err)
		}
	}
	return bin, dirs
}

// moduleRoot is the nearest directory holding go.mod at or above the test's own (the
// working directory of a test is its package's).
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", errors.New("testbin: no go.mod at or above the test's directory")
		}
		dir = up
	}
}
