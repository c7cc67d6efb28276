package testbin

import (
	"bufio"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/internal/ctxtime"
)

// DefaultReadyWait bounds the wait for a process's ready lines when Spec.Wait is zero:
// generous, because a race-enabled binary starts slowly on a loaded machine.
const DefaultReadyWait = 30 * time.Second

// Spec says what process to start and when it is ready.
type Spec struct {
	Name string   // for messages; the binary's file name when empty
	Bin  string   // the binary, from Build
	Args []string // its arguments
	// Ready are texts of the log lines the process writes on stderr once it serves
	// (for example "mcprouter listening"): it is ready when it wrote a line containing
	// each, in any order. The addr= value of each such line is kept in Proc.Addrs.
	Ready []string
	// Wait bounds the wait for the ready lines (DefaultReadyWait when zero).
	Wait time.Duration
	// Stdout receives the process's standard output (discarded when nil).
	Stdout io.Writer
}

// Proc is a child process a test started; its stderr is read to the end into Log.
type Proc struct {
	Spec
	Cmd *exec.Cmd
	Log *Log
	// Addrs are the addr= values of the ready lines, in the order of Spec.Ready.
	Addrs []string

	exited chan struct{}
	err    error // Wait's result, set before exited closes
	raced  bool  // the process printed a race detector report; set before exited closes
}

// Start starts the process and waits until it is ready (see Spec.Ready), failing the
// test if it exits or stays silent first. At cleanup a process still running is killed
// by its PID, a race report it printed fails the test, and if the test failed its last
// lines are logged. Callers that end it gracefully register their own cleanup, which
// runs first.
func Start(tb testing.TB, s Spec) *Proc {
	tb.Helper()
	p, err := Spawn(s)
	if p != nil {
		tb.Cleanup(func() {
			p.Kill()
			if p.Raced() {
				tb.Errorf("the race detector reported a data race in %s:\n%s", p.Name, p.Log)
			} else if tb.Failed() {
				tb.Logf("%s log (last lines):\n%s", p.Name, p.Log)
			}
		})
	}
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// Spawn is Start for callers that retry (a restart on a port just released): it
// returns the error instead of failing the test and registers no cleanup. On error the
// process, if it was started, has been killed; the caller must Kill a returned one.
func Spawn(s Spec) (*Proc, error) {
	if s.Name == "" {
		s.Name = filepath.Base(s.Bin)
	}
	if s.Wait <= 0 {
		s.Wait = DefaultReadyWait
	}
	cmd := exec.Command(s.Bin, s.Args...)
	cmd.Stdout = s.Stdout
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", s.Name, err)
	}
	p := &Proc{Spec: s, Cmd: cmd, Log: new(Log), Addrs: make([]string, len(s.Ready)), exited: make(chan struct{})}
	ready := make(chan struct{})
	go p.read(stderr, ready)
	t := time.NewTimer(s.Wait)
	defer t.Stop()
	select {
	case <-ready:
		return p, nil
	case <-p.exited:
		return p, fmt.Errorf("%s exited before it was ready: %v\n%s", s.Name, p.err, p.Log)
	case <-t.C:
		p.Kill()
		return p, fmt.Errorf("%s did not log %q within %v\n%s", s.Name, s.Ready, s.Wait, p.Log)
	}
}

// read keeps every stderr line, closes ready once each ready text has been seen, and
// records the exit once stderr is done.
func (p *Proc) read(stderr io.Reader, ready chan struct{}) {
	seen := make([]bool, len(p.Ready))
	missing, raced := len(p.Ready), false
	if missing == 0 {
		close(ready)
	}
	sc := bufio.NewScanner(stderr)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		p.Log.Add(line)
		raced = raced || strings.Contains(line, "WARNING: DATA RACE")
		for i, r := range p.Ready {
			if missing > 0 && !seen[i] && strings.Contains(line, r) {
				seen[i], p.Addrs[i] = true, LogValue(line, "addr")
				if missing--; missing == 0 {
					close(ready)
				}
			}
		}
	}
	io.Copy(io.Discard, stderr) // a line past the scanner's limit: keep the pipe drained
	p.err = p.Cmd.Wait()
	p.raced = raced
	close(p.exited)
}

// Addr is the addr= value of the first ready line.
func (p *Proc) Addr() string {
	if len(p.Addrs) == 0 {
		return ""
	}
	return p.Addrs[0]
}

// Exited is closed once the process has exited and its stderr is read.
func (p *Proc) Exited() <-chan struct{} { return p.exited }

// Err is the process's exit error (nil for a clean exit); valid once Exited is closed.
func (p *Proc) Err() error { return p.err }

// Raced reports whether the process printed a race detector report; valid once Exited
// is closed.
func (p *Proc) Raced() bool {
	select {
	case <-p.exited:
		return p.raced
	default:
		return false
	}
}

// WaitExit waits up to d for the process to exit on its own; it reports whether it did.
func (p *Proc) WaitExit(d time.Duration) bool { return ctxtime.Wait(p.exited, d) }

// Kill ends the process at once (SIGKILL to its PID) and waits for it (bounded: a
// grandchild holding its stderr open would keep the reader waiting).
func (p *Proc) Kill() {
	select {
	case <-p.exited:
		return
	default:
	}
	p.Cmd.Process.Kill()
	p.WaitExit(DefaultReadyWait)
}

// Stop ends the process gracefully (SIGTERM to its PID) and kills it if it is still
// running after d; it reports whether it stopped on its own. One that did not gets a
// SIGQUIT first, so that a Go program writes every goroutine's stack to its log: what
// it was waiting for is then in the failing test's output.
func (p *Proc) Stop(d time.Duration) bool {
	select {
	case <-p.exited:
		return true
	default:
	}
	p.Cmd.Process.Signal(syscall.SIGTERM)
	if p.WaitExit(d) {
		return true
	}
	p.Cmd.Process.Signal(syscall.SIGQUIT)
	p.WaitExit(stackDumpWait)
	p.Kill()
	return false
}

// stackDumpWait is how long Stop lets a process write its stacks after SIGQUIT.
const stackDumpWait = 5 * time.Second

// Pipes connects the standard input and output of cmd, not yet started, for a test
// that speaks to the process over stdio (a stdio backend, the router's stdio mode),
// failing the test when either pipe cannot be made.
func Pipes(tb testing.TB, cmd *exec.Cmd) (stdin io.WriteCloser, stdout io.ReadCloser) {
	tb.Helper()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	stdout, err = cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	return stdin, stdout
}
