// Package testbin builds the project's commands for end-to-end tests and runs them as
// child processes on loopback: each binary is built once per test process, a process is
// ready when it logged its ready lines (an event, read from its stderr, never a sleep),
// its last stderr lines are kept for failure messages, and it is ended by its own PID at
// cleanup. Only tests import it.
package testbin

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Import paths of the project's commands.
const (
	Router  = "github.com/mcprouter/mcprouter/cmd/mcprouter"
	Backend = "github.com/mcprouter/mcprouter/cmd/mcpbackend"
)

// buildTimeout bounds one go build; a cold race build of the router takes minutes on a
// loaded machine.
const buildTimeout = 10 * time.Minute

// built is the process-wide cache of binaries, keyed by package and race flag. Its
// directory exists only while Main runs, which removes it.
var built struct {
	mu   sync.Mutex
	dir  string // "" outside Main: each Build then goes to the test's own TempDir
	bins map[string]*binary
}

type binary struct {
	once sync.Once
	dir  string // its own folder in the cache: two packages may end in the same name
	path string
	err  error
}

// Main runs the package's tests with a cache of built binaries and removes them after;
// a package whose tests start binaries more than once calls it from TestMain:
//
//	func TestMain(m *testing.M) { testbin.Main(m) }
//
// Without it, Build still works but builds again for each test.
func Main(m *testing.M) {
	dir, err := os.MkdirTemp("", "testbin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "testbin:", err)
		os.Exit(1)
	}
	built.mu.Lock()
	built.dir, built.bins = dir, map[string]*binary{}
	built.mu.Unlock()
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// Build returns the path of pkg's binary (an import path, or a directory relative to
// the test's package), built with the race detector when the test binary has it, so
// that a race in the child under real load fails the test too.
func Build(tb testing.TB, pkg string) string {
	tb.Helper()
	return build(tb, pkg, raceEnabled)
}

// BuildFixture is Build without the race detector whatever the test's flags: for
// fixtures (a reference backend behind the router) whose own races are not under test
// and that should stay fast.
func BuildFixture(tb testing.TB, pkg string) string {
	tb.Helper()
	return build(tb, pkg, false)
}

func build(tb testing.TB, pkg string, race bool) string {
	tb.Helper()
	built.mu.Lock()
	if built.dir == "" {
		built.mu.Unlock()
		path, err := goBuild(tb.TempDir(), pkg, race)
		if err != nil {
			tb.Fatal(err)
		}
		return path
	}
	key := fmt.Sprintf("%s race=%t", pkg, race)
	b := built.bins[key]
	if b == nil {
		b = &binary{dir: filepath.Join(built.dir, fmt.Sprint(len(built.bins)))}
		built.bins[key] = b
	}
	built.mu.Unlock()
	b.once.Do(func() { b.path, b.err = goBuild(b.dir, pkg, race) })
	if b.err != nil {
		tb.Fatal(b.err)
	}
	return b.path
}

// goBuild builds pkg into dir, named after its last path element.
func goBuild(dir, pkg string, race bool) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(dir, filepath.Base(strings.TrimSuffix(pkg, "/")))
	args := []string{"build", "-o", path}
	if race {
		args = append(args, "-race")
	}
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, "go", append(args, pkg)...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go %s %s: %v\n%s", strings.Join(args[:len(args)-1], " "), pkg, err, out)
	}
	return path, nil
}
