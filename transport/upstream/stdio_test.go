//go:build unix

package upstream

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/internal/testbin"
	"github.com/mcprouter/mcprouter/internal/testwait"
)

// fastRestart keeps the tests' restarts quick; the backoff itself is tested on its own.
func fastRestart(o StdioOptions) StdioOptions {
	o.BackoffMin, o.BackoffMax = 10*time.Millisecond, 50*time.Millisecond
	o.StopTimeout = 500 * time.Millisecond
	return o
}

func startPool(t *testing.T, cmd Command, n int, opts StdioOptions) (*Pool, []*recSink) {
	t.Helper()
	sinks := make([]*recSink, n)
	for i := range sinks {
		sinks[i] = newRecSink()
	}
	p, err := StartPool(cmd, n, opts, func(i int) Sink { return sinks[i] })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p, sinks
}

func TestStdioPoolLifecycle(t *testing.T) {
	log, logs := newLogCapture()
	p, sinks := startPool(t, childCommand("echo"), 2, fastRestart(StdioOptions{Name: "kid", Logger: log}))
	if p.Len() != 2 {
		t.Fatalf("Len %d", p.Len())
	}
	pids := map[int]bool{}
	for i := 0; i < p.Len(); i++ {
		c, s := p.Conn(i), sinks[i]
		doHandshake(t, c, s)
		if err := c.Send(testCtx(t), []byte(msgList)); err != nil {
			t.Fatal(err)
		}
		mustContain(t, s.waitResponse(t, "2"), `"name":"echo"`)
		if err := c.Send(testCtx(t), []byte(msgCall(3, "echo", "x"))); err != nil {
			t.Fatal(err)
		}
		got := resultText(t, s.waitResponse(t, "3"))
		if got != "pid "+strconv.Itoa(c.PID()) {
			t.Fatalf("instance %d answered %q, its pid is %d", i, got, c.PID())
		}
		pids[c.PID()] = true
	}
	if len(pids) != 2 {
		t.Fatalf("instances share a process: %v", pids)
	}
	// stderr reaches the log, tagged with the backend and the instance.
	for i := 0; i < 2; i++ {
		want := strconv.Itoa(i)
		sinks[0].waitFor(t, "stderr line of instance "+want, func() bool {
			_, ok := logs.find(func(c capturedRecord) bool {
				return c.msg == "backend stderr" && c.attrs["backend"] == "kid" && c.attrs["instance"] == want &&
					strings.HasPrefix(c.attrs["line"], "child started mode=echo")
			})
			return ok
		})
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	for pid := range pids {
		if alive(pid) {
			t.Errorf("child %d still running after Close", pid)
		}
	}
	if err := p.Conn(0).Send(testCtx(t), []byte(msgList)); !errors.Is(err, ErrClosed) {
		t.Fatalf("Send after Close: %v", err)
	}
	noLeaks(t)
}

// alive reports whether pid is a running (not zombie) process.
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true // no /proc: trust kill(0)
	}
	// The state follows the parenthesised command name.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

func TestStdioCrashRestartsAndRenews(t *testing.T) {
	p, sinks := startPool(t, childCommand("echo"), 1, fastRestart(StdioOptions{}))
	c, s := p.Conn(0), sinks[0]
	doHandshake(t, c, s)
	first := c.PID()
	if err := c.Send(testCtx(t), []byte(msgCall(5, "crash", ""))); err != nil {
		t.Fatal(err)
	}
	s.waitFor(t, "EventDown then EventRenewed", func() bool { return s.hasEvent(EventDown) && s.hasEvent(EventRenewed) })
	if c.PID() == first || c.PID() == 0 || c.Restarts() != 1 {
		t.Fatalf("pid %d -> %d, restarts %d", first, c.PID(), c.Restarts())
	}
	if err := c.Send(testCtx(t), []byte(msgCall(6, "echo", ""))); err != nil {
		t.Fatal(err)
	}
	if got := resultText(t, s.waitResponse(t, "6")); got != "pid "+strconv.Itoa(c.PID()) {
		t.Fatalf("answered by %q, want the new child %d", got, c.PID())
	}
	if s.response(`"mcprouter-renew-1"`) != nil {
		t.Fatal("the replayed initialize's reply leaked to the Sink")
	}
}

func TestStdioDownErrorsWhileWaitingToRestart(t *testing.T) {
	opts := fastRestart(StdioOptions{})
	opts.BackoffMin, opts.BackoffMax = time.Hour, time.Hour // stays down for the test
	p, sinks := startPool(t, childCommand("echo"), 1, opts)
	c, s := p.Conn(0), sinks[0]
	doHandshake(t, c, s)
	if err := c.Send(testCtx(t), []byte(msgCall(5, "crash", ""))); err != nil {
		t.Fatal(err)
	}
	s.waitFor(t, "EventDown", func() bool { return s.hasEvent(EventDown) })
	err := c.Send(testCtx(t), []byte(msgList))
	if !errors.Is(err, ErrBackendDown) || !strings.Contains(err.Error(), "exit status 3") {
		t.Fatalf("Send while down: %v, want ErrBackendDown with the exit status", err)
	}
	// Close does not wait for the backoff.
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	noLeaks(t)
}

func TestStdioRestartWithoutHandshakeIsUp(t *testing.T) {
	p, sinks := startPool(t, childCommand("echo"), 1, fastRestart(StdioOptions{}))
	c, s := p.Conn(0), sinks[0]
	if err := c.Send(testCtx(t), []byte(msgCall(5, "crash", ""))); err != nil {
		t.Fatal(err)
	}
	s.waitFor(t, "EventUp", func() bool { return s.hasEvent(EventUp) })
	if s.hasEvent(EventRenewed) {
		t.Fatal("renewed without a handshake to replay")
	}
	doHandshake(t, c, s) // the router initializes the new child itself
}

// TestStdioVersionChangeHandsBackToRouter: a restarted child that negotiates another
// revision cannot be renewed behind the router's back.
func TestStdioVersionChangeHandsBackToRouter(t *testing.T) {
	dir := t.TempDir()
	flag := filepath.Join(dir, "v2")
	// The child's mode is read from a file so that the restart changes it.
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	cmd := Command{Path: sh, Args: []string{"-c", `exec env GORACE=atexit_sleep_ms=0 ` + childEnv + `=$(cat ` + flag + `) "$0" -test.run='^$'`, os.Args[0]}}
	if err := os.WriteFile(flag, []byte("echo"), 0o600); err != nil {
		t.Fatal(err)
	}
	p, sinks := startPool(t, cmd, 1, fastRestart(StdioOptions{}))
	c, s := p.Conn(0), sinks[0]
	doHandshake(t, c, s)
	if err := os.WriteFile(flag, []byte("v2"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := c.Send(testCtx(t), []byte(msgCall(5, "crash", ""))); err != nil {
		t.Fatal(err)
	}
	s.waitFor(t, "EventUp after a refused replay", func() bool { return s.hasEvent(EventUp) })
	if s.hasEvent(EventRenewed) {
		t.Fatal("renewed onto another protocol revision")
	}
}

func TestStdioCloseKillsProcessGroup(t *testing.T) {
	pidfile := filepath.Join(t.TempDir(), "pid")
	p, sinks := startPool(t, childCommand("spawn", "PIDFILE="+pidfile), 1, fastRestart(StdioOptions{}))
	doHandshake(t, p.Conn(0), sinks[0])
	b, err := os.ReadFile(pidfile)
	if err != nil {
		t.Fatal(err)
	}
	grandchild, _ := strconv.Atoi(string(b))
	if grandchild == 0 || !alive(grandchild) {
		t.Fatalf("grandchild %q not running", b)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	sinks[0].waitFor(t, "the grandchild to be gone", func() bool { return !alive(grandchild) })
	noLeaks(t)
}

func TestStdioCloseEscalatesToKill(t *testing.T) {
	p, sinks := startPool(t, childCommand("stubborn"), 1, fastRestart(StdioOptions{}))
	c := p.Conn(0)
	doHandshake(t, c, sinks[0])
	pid := c.PID()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if alive(pid) {
		t.Fatalf("stubborn child %d survived Close", pid)
	}
	noLeaks(t)
}

// TestStdioCloseWithCallInFlight: closing an Instance while its child runs a call (the
// reference backend, which answers the calls it has before it exits once its stdin
// ends) cancels the call before closing stdin, and the child exits by itself. Before,
// the child got only the end of its stdin, went on with the call the router no longer
// wanted, and held Close until SIGTERM, StopTimeout later (2 s by default; here the
// hang guard): it never ended by itself.
func TestStdioCloseWithCallInFlight(t *testing.T) {
	log, logs := newLogCapture()
	opts := fastRestart(StdioOptions{Logger: log})
	opts.StopTimeout = waitLimit // a hang guard: the child must end by itself
	p, sinks := startPool(t, childCommand("reference"), 1, opts)
	c, s := p.Conn(0), sinks[0]
	doHandshake(t, c, s)
	if err := c.Send(testCtx(t), []byte(msgLongCall)); err != nil {
		t.Fatal(err)
	}
	s.waitProgress(t)
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if _, ok := logs.find(func(r capturedRecord) bool { return r.attrs["line"] == referenceEnded }); !ok {
		t.Fatal("the child did not end by itself: it went on with the call the router no longer wanted until a signal stopped it")
	}
	noLeaks(t)
}

// TestStdioCloseWithStdinHeldElsewhere: a child that reads none of its stdin and
// leaves a process outside its group holding it: the writer blocks on the full pipe,
// and once the child is gone it must still return. Before, the pipe stayed open (the
// other process holds its read end), the writer blocked for good and with it the end
// of the process: Close returned after the last step of its stop, leaving the writer
// and the waiter behind.
func TestStdioCloseWithStdinHeldElsewhere(t *testing.T) {
	pidfile := filepath.Join(t.TempDir(), "pid")
	p, _ := startPool(t, childCommand("escape", "PIDFILE="+pidfile), 1, fastRestart(StdioOptions{QueueLen: 1}))
	var held int
	testwait.For(t, "the grandchild's pid", waitLimit, func() bool {
		b, _ := os.ReadFile(pidfile)
		held, _ = strconv.Atoi(string(b))
		return held > 0
	})
	t.Cleanup(func() { _ = syscall.Kill(held, syscall.SIGKILL) })
	fillQueue(t, p.Conn(0))
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	noLeaks(t)
}

func TestStdioNoRestart(t *testing.T) {
	opts := fastRestart(StdioOptions{NoRestart: true})
	p, sinks := startPool(t, childCommand("echo"), 1, opts)
	c, s := p.Conn(0), sinks[0]
	if err := c.Send(testCtx(t), []byte(msgCall(5, "crash", ""))); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.Done():
	case <-time.After(waitLimit):
		t.Fatal("instance not dead after its child exited with NoRestart")
	}
	if !errors.Is(c.Err(), ErrBackendDown) || !s.hasEvent(EventDown) {
		t.Fatalf("Err %v, events %v", c.Err(), s.eventList())
	}
}

func TestStdioStartErrors(t *testing.T) {
	sink := func(int) Sink { return newRecSink() }
	if _, err := StartPool(Command{Path: "/nonexistent/mcp-server"}, 1, StdioOptions{}, sink); err == nil {
		t.Fatal("a missing executable was accepted")
	}
	if _, err := StartPool(Command{}, 1, StdioOptions{}, sink); err == nil {
		t.Fatal("an empty command was accepted")
	}
	if _, err := StartPool(childCommand("echo"), 0, StdioOptions{}, sink); err == nil {
		t.Fatal("zero instances accepted")
	}
	noLeaks(t)
}

// bigNotification is a message larger than a pipe's buffer.
var bigNotification = []byte(`{"jsonrpc":"2.0","method":"notifications/x","params":{"pad":"` + strings.Repeat("x", 1<<16) + `"}}`)

// fillQueue sends to c, an instance whose child never reads its stdin, until the pipe
// and the queue are full: Send then gives up when its context does instead of
// blocking.
func fillQueue(t *testing.T, c *Instance) {
	t.Helper()
	var err error
	for i := 0; i < 1000 && err == nil; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		err = c.Send(ctx, bigNotification)
		cancel()
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Send with a full queue: %v, want context.DeadlineExceeded", err)
	}
}

func TestStdioSendRespectsContextWhenQueueFull(t *testing.T) {
	p, _ := startPool(t, childCommand("sleep"), 1, fastRestart(StdioOptions{QueueLen: 1}))
	fillQueue(t, p.Conn(0))
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	noLeaks(t)
}

// TestStdioCloseFailsSendWaitingForQueue: a Send waiting for room in the queue of a
// child that does not read its stdin ends with ErrClosed when the instance is closed.
// Before, it waited for the child's stdin to close, which the child's stop did only
// once the child was killed (StopTimeout later), and then failed with ErrBackendDown
// ("child's stdin is closed"), as if the backend had gone.
func TestStdioCloseFailsSendWaitingForQueue(t *testing.T) {
	p, _ := startPool(t, childCommand("sleep"), 1, fastRestart(StdioOptions{QueueLen: 1}))
	c := p.Conn(0)
	fillQueue(t, c)
	sent := make(chan error, 1)
	go func() { sent <- c.Send(testCtx(t), bigNotification) }()
	waitGoroutine(t, "upstream.(*process).send")
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	wantClosed(t, sent, "the Send waiting for the queue")
	noLeaks(t)
}

// TestStdioEverythingServer runs the official Go SDK's conformance server as a real
// stdio backend.
func TestStdioEverythingServer(t *testing.T) {
	testbin.Long(t, "builds the Go SDK's everything-server")
	bin := testbin.BuildFixture(t, "github.com/modelcontextprotocol/go-sdk/conformance/everything-server")
	log, _ := newLogCapture()
	p, sinks := startPool(t, Command{Path: bin}, 1, StdioOptions{Name: "everything", Logger: log})
	c, s := p.Conn(0), sinks[0]
	doHandshake(t, c, s)
	if err := c.Send(testCtx(t), []byte(msgList)); err != nil {
		t.Fatal(err)
	}
	mustContain(t, s.waitResponse(t, "2"), `"test_simple_text"`)
	if err := c.Send(testCtx(t), []byte(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"test_simple_text","arguments":{}}}`)); err != nil {
		t.Fatal(err)
	}
	mustContain(t, s.waitResponse(t, "3"), `"type":"text"`)
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	noLeaks(t)
}

func TestBackoffBounds(t *testing.T) {
	b := backoff{min: 100 * time.Millisecond, max: time.Second}
	want := []time.Duration{100, 200, 400, 800, 1000, 1000}
	for i, w := range want {
		d := b.next()
		hi := w * time.Millisecond
		if d < hi/2 || d > hi {
			t.Fatalf("attempt %d: delay %v outside [%v, %v]", i, d, hi/2, hi)
		}
	}
	b.reset()
	if d := b.next(); d > 100*time.Millisecond {
		t.Fatalf("after reset: %v", d)
	}
}

// TestStdioChildEnvironment: a child sees the allowed part of the router's environment
// and its own entries, never the router's other variables (its secrets).
func TestStdioChildEnvironment(t *testing.T) {
	t.Setenv("MCPR_TEST_SECRET", "hunter2")
	t.Setenv("LC_MCPR_TEST", "kept")
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	script := `echo "secret=[$MCPR_TEST_SECRET] lc=[$LC_MCPR_TEST] extra=[$EXTRA] home=[${HOME:+set}]" >&2; cat >/dev/null`
	for _, tc := range []struct {
		name  string
		allow []string
		want  string
	}{
		{"default allowlist", nil, "secret=[] lc=[kept] extra=[x] home=[set]"},
		{"configured allowlist", []string{"MCPR_TEST_*"}, "secret=[hunter2] lc=[] extra=[x] home=[]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log, logs := newLogCapture()
			cmd := Command{Path: sh, Args: []string{"-c", script}, Env: []string{"EXTRA=x"}, EnvAllow: tc.allow}
			_, sinks := startPool(t, cmd, 1, StdioOptions{Name: "env", Logger: log})
			var line string
			sinks[0].waitFor(t, "the child's environment on stderr", func() bool {
				c, ok := logs.find(func(c capturedRecord) bool { return c.msg == "backend stderr" })
				line = c.attrs["line"]
				return ok
			})
			if line != tc.want {
				t.Errorf("the child saw %q, want %q", line, tc.want)
			}
		})
	}
}

// TestStdioStderrRateLimited: a child flooding stderr gets a bounded number of log
// lines, and the log says how many were dropped.
func TestStdioStderrRateLimited(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	const lines = 2000
	log, logs := newLogCapture()
	script := `i=0; while [ $i -lt ` + strconv.Itoa(lines) + ` ]; do echo "line $i" >&2; i=$((i+1)); done`
	start := time.Now()
	p, _ := startPool(t, Command{Path: sh, Args: []string{"-c", script}}, 1, StdioOptions{Name: "loud", Logger: log, NoRestart: true})
	select {
	case <-p.Conn(0).Done(): // the child wrote everything and exited
	case <-time.After(time.Minute):
		t.Fatal("the child did not exit")
	}
	if err := p.Close(); err != nil { // waits for the stderr reader
		t.Fatal(err)
	}
	elapsed := time.Since(start)
	logged := 0
	logs.find(func(c capturedRecord) bool {
		if c.msg == "backend stderr" {
			logged++
		}
		return false
	})
	if logged < stderrBurst {
		t.Errorf("only %d stderr lines logged: the burst of %d should pass", logged, stderrBurst)
	}
	if bound := stderrBurst + int(elapsed.Seconds()*stderrLinesPerSec) + 1; logged > bound || logged >= lines {
		t.Errorf("%d of %d stderr lines logged in %s; the rate limit allows %d", logged, lines, elapsed, bound)
	}
}
