package testbin

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestMain(m *testing.M) { Main(m) }

// TestStartStop: the ready lines are found in any order with their addresses, the
// binary is built once, and SIGTERM ends the process cleanly.
func TestStartStop(t *testing.T) {
	bin := Build(t, "./testdata/fake")
	if again := Build(t, "./testdata/fake"); again != bin {
		t.Fatalf("second Build = %s, want the cached %s", again, bin)
	}
	var out Log
	p := Start(t, Spec{Bin: bin, Ready: []string{"fake listening", "admin listening"}, Stdout: &out})
	if p.Addr() != "127.0.0.1:1" || p.Addrs[1] != "127.0.0.1:2" {
		t.Fatalf("addrs %q", p.Addrs)
	}
	if p.Name != "fake" {
		t.Errorf("name %q, want the binary's", p.Name)
	}
	if !p.Stop(DefaultReadyWait) || p.Err() != nil {
		t.Fatalf("stop: %v\n%s", p.Err(), p.Log)
	}
	if !p.Log.Contains("stopped") || p.Log.Value("fake listening", "other") != "x" {
		t.Errorf("log:\n%s", p.Log)
	}
	if out.String() != "to stdout" {
		t.Errorf("stdout %q", out.String())
	}
}

// TestSpawnErrors: a process that exits first, and one that never logs the ready
// line, give errors that carry its output.
func TestSpawnErrors(t *testing.T) {
	bin := Build(t, "./testdata/fake")
	p, err := Spawn(Spec{Bin: bin, Args: []string{"-exit", "3"}, Ready: []string{"fake listening"}})
	if err == nil || !strings.Contains(err.Error(), "exited before it was ready") || !strings.Contains(err.Error(), "starting") {
		t.Fatalf("exit first: %v", err)
	}
	if p.Err() == nil {
		t.Error("exit status 3 not reported")
	}
	p, err = Spawn(Spec{Bin: bin, Ready: []string{"never"}, Wait: 50 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), `did not log ["never"]`) {
		t.Fatalf("silent: %v", err)
	}
	select {
	case <-p.Exited():
	default:
		t.Error("the silent process was not killed")
	}
}

func TestLog(t *testing.T) {
	var l Log
	l.Write([]byte("a x=1\nb "))
	l.Write([]byte("y=\"2\"\n"))
	for i := 0; i < maxLogLines; i++ {
		l.Add("c")
	}
	if l.Count("c") != maxLogLines || l.Contains("a x=1") {
		t.Fatalf("kept %d c lines; first line kept: %v", l.Count("c"), l.Contains("a x=1"))
	}
	l.Write([]byte("d z=3 w=4"))
	if !strings.HasSuffix(l.String(), "\nd z=3 w=4") {
		t.Errorf("unterminated line lost: %q", l.String()[len(l.String())-20:])
	}
	if got := LogValue(`msg="b" y="2"`, "y"); got != "2" {
		t.Errorf("LogValue = %q", got)
	}
	if got := LogValue(`msg=b`, "y"); got != "" {
		t.Errorf("LogValue of a missing key = %q", got)
	}
}

// TestRouterConfig: each call writes its own file, which holds what was given.
func TestRouterConfig(t *testing.T) {
	a, b := RouterConfig(t, "listen: 127.0.0.1:0\n"), RouterConfig(t, "")
	if a == b || filepath.Base(a) != "mcprouter.yaml" {
		t.Fatalf("paths %s and %s: want two files named mcprouter.yaml", a, b)
	}
	if got, err := os.ReadFile(a); err != nil || string(got) != "listen: 127.0.0.1:0\n" {
		t.Fatalf("%s holds %q (%v)", a, got, err)
	}
}

// TestNode: an installation in MCPROUTER_NODE_DIR gives its node binary and the
// packages' directories; a package missing from it skips the test outside CI.
func TestNode(t *testing.T) {
	dir := t.TempDir()
	for _, p := range []string{"node_modules/.bin/node", "node_modules/@scope/pkg/package.json"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, p), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("MCPROUTER_NODE_DIR", dir)
	t.Setenv("CI", "")
	bin, dirs := Node(t, "@scope/pkg")
	if bin != filepath.Join(dir, "node_modules", ".bin", "node") || len(dirs) != 1 || dirs[0] != filepath.Join(dir, "node_modules", "@scope", "pkg") {
		t.Fatalf("Node = %s %q", bin, dirs)
	}
	returned := false
	t.Run("missing", func(t *testing.T) {
		Node(t, "absent")
		returned = true
	})
	if returned {
		t.Error("Node returned with a package missing, want the test skipped")
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	if root, err := moduleRoot(); err != nil || root != filepath.Dir(filepath.Dir(wd)) {
		t.Errorf("moduleRoot = %q %v, want two levels above internal/testbin", root, err)
	}
}

// TestFreeAddrDistinct: FreeAddr never hands out one address twice in a process, though
// the kernel may offer a released port again (about one draw in 45 on this machine).
func TestFreeAddrDistinct(t *testing.T) {
	seen := map[string]bool{}
	for range 300 {
		a := FreeAddr(t)
		if seen[a] {
			t.Fatalf("FreeAddr returned %s twice", a)
		}
		seen[a] = true
	}
}
