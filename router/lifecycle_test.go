package router

// Lifecycle tests run the router behind a real transport. Scripts under
// testdata/lifecycle/ drive a stdio session: "> " lines are what the client writes,
// "< " lines the exact lines the router must write back, in order; "=== " starts a fresh
// session; "# " lines are comments. go test -run TestLifecycleScripts -update rewrites
// the expected lines from what the router answers.

import (
	"bufio"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/internal/golden"
	"github.com/mcprouter/mcprouter/internal/testwait"
	"github.com/mcprouter/mcprouter/transport"
)

// waitLimit bounds every wait of these tests.
const waitLimit = 20 * time.Second

// eventually waits for cond, which an event in another goroutine makes true, failing
// the test with what if it does not hold within waitLimit.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testwait.For(t, what, waitLimit, cond)
}

func newTestRouter(t testing.TB, fleet Fleet) *Router {
	t.Helper()
	r, err := New(Config{Name: "mcprouter", Version: "test", Fleet: fleet})
	if err != nil {
		t.Fatal(err)
	}
	testwait.Cleanup(t, waitLimit, r.Close)
	return r
}

// stdioSession is one client session over transport.ServeStdio.
type stdioSession struct {
	t     testing.TB
	in    *io.PipeWriter
	lines chan string // stdout lines; closed at EOF
	done  chan error
}

func openStdio(t testing.TB, r *Router) *stdioSession {
	t.Helper()
	reg := transport.NewRegistry(transport.RegistryConfig{}, r)
	t.Cleanup(reg.Close)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	s := &stdioSession{t: t, in: inW, lines: make(chan string, 64), done: make(chan error, 1)}
	go func() {
		err := transport.ServeStdio(context.Background(), transport.StdioConfig{}, reg, r, inR, outW)
		outW.Close()
		inR.Close()
		s.done <- err
	}()
	go func() {
		sc := bufio.NewScanner(outR)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			s.lines <- sc.Text()
		}
		close(s.lines)
	}()
	t.Cleanup(func() { inW.Close(); outR.Close() })
	return s
}

func (s *stdioSession) send(line string) {
	s.t.Helper()
	if _, err := io.WriteString(s.in, line+"\n"); err != nil {
		s.t.Fatalf("write: %v", err)
	}
}

// recv returns the next stdout line, or "EOF" when the session's output ended.
func (s *stdioSession) recv() string {
	s.t.Helper()
	select {
	case l, ok := <-s.lines:
		if !ok {
			return "EOF"
		}
		return l
	case <-time.After(waitLimit):
		s.t.Fatal("timed out waiting for the router's answer")
		return ""
	}
}

func (s *stdioSession) close() error {
	s.in.Close()
	return testwait.Recv(s.t, "ServeStdio to end", waitLimit, s.done)
}

func TestLifecycleScripts(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "lifecycle", "*.txt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts: %v", err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txt"), func(t *testing.T) {
			runScript(t, file)
		})
	}
}

func runScript(t *testing.T, file string) {
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	r := newTestRouter(t, nil)
	var s *stdioSession
	var out []string // the script as the router answered it
	lines := strings.Split(strings.TrimRight(string(raw), "\n"), "\n")
	for _, line := range lines {
		switch {
		case strings.HasPrefix(line, "=== ") || s == nil && strings.HasPrefix(line, "> "):
			if s != nil {
				s.close()
			}
			s = openStdio(t, r)
			if strings.HasPrefix(line, "=== ") {
				out = append(out, line)
				continue
			}
		}
		switch {
		case strings.HasPrefix(line, "> "):
			s.send(line[2:])
			out = append(out, line)
		case strings.HasPrefix(line, "< "):
			out = append(out, "< "+s.recv())
		default:
			out = append(out, line)
		}
	}
	if s != nil {
		s.close()
	}
	golden.Check(t, file, []byte(strings.Join(out, "\n")+"\n"))
}

// TestNegotiate is the version negotiation table: the requested revision back when
// supported, otherwise the latest.
func TestNegotiate(t *testing.T) {
	for _, c := range []struct{ requested, want string }{
		{"2024-11-05", "2024-11-05"},
		{"2025-03-26", "2025-03-26"},
		{"2025-06-18", "2025-06-18"},
		{"2025-11-25", "2025-11-25"},
		{"2026-07-28", Latest},
		{"2024-10-07", Latest},
		{"2099-01-01", Latest},
	} {
		if got := Negotiate(c.requested); got != c.want {
			t.Errorf("Negotiate(%q) = %q, want %q", c.requested, got, c.want)
		}
	}
	for _, v := range []string{"2025-1-01", "20250326", "", "2025-03-2x", "v2025-03-26"} {
		if validVersionSyntax(v) {
			t.Errorf("validVersionSyntax(%q) = true", v)
		}
	}
}
