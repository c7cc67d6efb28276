package upstream

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/cmd/mcpbackend/server"
	"github.com/mcprouter/mcprouter/codec"
)

// waitLimit bounds every wait in the tests. It is generous on purpose: the tests assert
// what happens, never how fast, on a shared machine.
const waitLimit = 20 * time.Second

// JSON-RPC messages the tests send, as the router would.
const (
	msgInit = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18",` +
		`"capabilities":{},"clientInfo":{"name":"upstream-test","version":"1.0.0"}}}`
	msgInitialized = `{"jsonrpc":"2.0","method":"notifications/initialized"}`
	msgList        = `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`
	// msgLongCall runs the reference backend's progress tool for a minute, with a
	// progress notification every 100 ms.
	msgLongCall = `{"jsonrpc":"2.0","id":7,"method":"tools/call",` +
		`"params":{"name":"progress","arguments":{"steps":600,"intervalMs":100},"_meta":{"progressToken":"p"}}}`
)

func msgCall(id int, tool, text string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":{"text":%q}}}`, id, tool, text)
}

// recSink records what a Conn delivers.
type recSink struct {
	mu     sync.Mutex
	msgs   [][]byte
	events []Event
	errs   []error
	signal chan struct{}
}

func newRecSink() *recSink { return &recSink{signal: make(chan struct{}, 1)} }

func (s *recSink) Message(msg []byte) {
	s.mu.Lock()
	s.msgs = append(s.msgs, append([]byte(nil), msg...))
	s.mu.Unlock()
	s.poke()
}

func (s *recSink) Event(e Event, err error) {
	s.mu.Lock()
	s.events = append(s.events, e)
	s.errs = append(s.errs, err)
	s.mu.Unlock()
	s.poke()
}

func (s *recSink) poke() {
	select {
	case s.signal <- struct{}{}:
	default:
	}
}

// response returns the response with the given raw id, or nil.
func (s *recSink) response(id string) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range s.msgs {
		var cm codec.Message
		if codec.Scan(m, &cm) == nil && (cm.Kind == codec.KindResult || cm.Kind == codec.KindError) && string(cm.ID) == id {
			return m
		}
	}
	return nil
}

// count returns how many recorded messages satisfy pred.
func (s *recSink) count(pred func(m *codec.Message) bool) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, b := range s.msgs {
		var cm codec.Message
		if codec.Scan(b, &cm) == nil && pred(&cm) {
			n++
		}
	}
	return n
}

func (s *recSink) hasEvent(e Event) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, x := range s.events {
		if x == e {
			return true
		}
	}
	return false
}

func (s *recSink) eventList() []Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Event(nil), s.events...)
}

// waitFor waits until cond holds, failing the test after waitLimit.
func (s *recSink) waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(waitLimit)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-s.signal:
		case <-tick.C:
		case <-deadline.C:
			t.Fatalf("timed out waiting for %s; events %v", what, s.eventList())
		}
	}
}

// waitProgress waits for a notifications/progress: a call is running.
func (s *recSink) waitProgress(t testing.TB) {
	t.Helper()
	s.waitFor(t, "the call's progress", func() bool {
		return s.count(func(m *codec.Message) bool { return isMethod(m, "notifications/progress") }) > 0
	})
}

// waitResponse waits for the response with id and returns it.
func (s *recSink) waitResponse(t testing.TB, id string) []byte {
	t.Helper()
	var r []byte
	s.waitFor(t, "response "+id, func() bool { r = s.response(id); return r != nil })
	return r
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	t.Cleanup(cancel)
	return ctx
}

// noLeaks fails the test if goroutines of this package's clients are still running
// after the clients were closed. It waits (bounded) because goroutines that were told to
// stop take a moment to get scheduled.
func noLeaks(t testing.TB) {
	t.Helper()
	markers := []string{
		"upstream.(*HTTPConn).streamLoop", "upstream.(*SSEConn).run", "upstream.(*SSEConn).read",
		"upstream.(*Instance).supervise", "upstream.(*process).", "upstream.(*pipeConn).",
	}
	var found string
	for i := 0; i < 200; i++ {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		found = ""
		for _, g := range bytes.Split(buf, []byte("\n\n")) {
			for _, m := range markers {
				if bytes.Contains(g, []byte(m)) {
					found = string(g)
				}
			}
		}
		if found == "" {
			return
		}
		time.Sleep(25 * time.Millisecond)
	}
	t.Fatalf("goroutine still running after Close:\n%s", found)
}

// wantClosed waits for the outcome of a call that Close must end (what names it),
// failing the test unless it is ErrClosed. The wait is a hang guard of waitLimit.
func wantClosed(t testing.TB, sent <-chan error, what string) {
	t.Helper()
	select {
	case err := <-sent:
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("%s ended with %v, want ErrClosed", what, err)
		}
	case <-time.After(waitLimit):
		t.Fatalf("%s did not end with Close", what)
	}
}

// waitGoroutine waits until a goroutine runs in fn (a function's name as a stack trace
// shows it), failing the test after waitLimit: a test that must act while a call is
// blocked somewhere knows it is.
func waitGoroutine(t testing.TB, fn string) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	buf := make([]byte, 1<<20)
	for !bytes.Contains(buf[:runtime.Stack(buf, true)], []byte(fn+"(")) {
		if time.Now().After(deadline) {
			t.Fatalf("no goroutine in %s", fn)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// rawBackend serves every connection a loopback listener accepts with serve, each in a
// goroutine of its own, for backends that break HTTP on purpose. It returns the
// listener's address; when the test ends the listener closes and serve's calls are
// waited for.
func rawBackend(t *testing.T, serve func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				serve(c)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	return ln.Addr().String()
}

// logCapture is a slog.Handler that keeps records for assertions.
type logCapture struct {
	mu    *sync.Mutex
	recs  *[]capturedRecord
	attrs []slog.Attr
}

type capturedRecord struct {
	level slog.Level
	msg   string
	attrs map[string]string
}

func newLogCapture() (*slog.Logger, *logCapture) {
	h := &logCapture{mu: new(sync.Mutex), recs: new([]capturedRecord)}
	return slog.New(h), h
}

func (h *logCapture) Enabled(context.Context, slog.Level) bool { return true }
func (h *logCapture) WithGroup(string) slog.Handler            { return h }
func (h *logCapture) WithAttrs(as []slog.Attr) slog.Handler {
	return &logCapture{mu: h.mu, recs: h.recs, attrs: append(append([]slog.Attr(nil), h.attrs...), as...)}
}

func (h *logCapture) Handle(_ context.Context, r slog.Record) error {
	c := capturedRecord{level: r.Level, msg: r.Message, attrs: map[string]string{}}
	for _, a := range h.attrs {
		c.attrs[a.Key] = a.Value.String()
	}
	r.Attrs(func(a slog.Attr) bool { c.attrs[a.Key] = a.Value.String(); return true })
	h.mu.Lock()
	*h.recs = append(*h.recs, c)
	h.mu.Unlock()
	return nil
}

func (h *logCapture) find(pred func(c capturedRecord) bool) (capturedRecord, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range *h.recs {
		if pred(c) {
			return c, true
		}
	}
	return capturedRecord{}, false
}

// The test binary doubles as the stdio backend: TestMain runs a child mode when the
// environment asks for one.
const childEnv = "UPSTREAM_TEST_CHILD"

func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		os.Exit(runChild(mode))
	}
	os.Exit(m.Run())
}

// childCommand is the Command that runs this test binary in a child mode. Under -race
// the race runtime sleeps a second at exit unless told not to, which would make every
// child look slow to stop.
func childCommand(mode string, env ...string) Command {
	return Command{Path: os.Args[0], Args: []string{"-test.run=^$"},
		Env: append([]string{childEnv + "=" + mode, "GORACE=atexit_sleep_ms=0"}, env...)}
}

// runChild is a minimal MCP server on stdio. Modes:
//
//	echo      answers initialize, tools/list and tools/call (tool "echo"; tool "crash"
//	          exits with status 3; tool "cutoff" answers with a line cut off, tool "huge"
//	          with a line of 8 KiB); logs to stderr
//	spawn     echo, after starting a grandchild (mode sleep) whose pid it writes to
//	          $PIDFILE
//	escape    reads nothing, after starting a grandchild (mode sleep) in a process
//	          group of its own that holds its stdin, whose pid it writes to $PIDFILE
//	stubborn  echo, but ignores stdin EOF and SIGTERM
//	sleep     sleeps until killed
//	v2        echo, but always negotiates protocol version 2099-01-01
//	reference the reference backend (cmd/mcpbackend) on stdio; once stdin ends and its
//	          calls are done, it says so on stderr (referenceEnded) and exits
func runChild(mode string) int {
	switch mode {
	case "reference":
		return runReference()
	case "sleep":
		time.Sleep(time.Hour)
		return 0
	case "spawn":
		if err := spawnSleeper(false); err != nil {
			return 1
		}
	case "escape":
		if err := spawnSleeper(true); err != nil {
			return 1
		}
		time.Sleep(time.Hour)
		return 0
	case "stubborn":
		signal.Ignore(syscall.SIGTERM)
	}
	fmt.Fprintf(os.Stderr, "child started mode=%s pid=%d\n", mode, os.Getpid())
	out := bufio.NewWriter(os.Stdout)
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var m codec.Message
		if codec.Scan(sc.Bytes(), &m) != nil || m.Kind != codec.KindRequest {
			continue
		}
		var result string
		switch string(m.Method) {
		case "initialize":
			v := "2025-06-18"
			if mode == "v2" {
				v = "2099-01-01"
			}
			result = `{"protocolVersion":"` + v + `","capabilities":{"tools":{}},"serverInfo":{"name":"child","version":"1"}}`
			fmt.Fprintln(os.Stderr, "initialize received")
		case "tools/list":
			result = `{"tools":[{"name":"echo","inputSchema":{"type":"object"}},{"name":"crash","inputSchema":{"type":"object"}}]}`
		case "tools/call":
			switch string(m.Name) {
			case "crash":
				fmt.Fprintln(os.Stderr, "crashing on purpose")
				out.Flush()
				return 3
			case "cutoff": // an answer that stops in the middle
				out.WriteString(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":{"content":[{"type":"text","text":"cut` + "\n")
				out.Flush()
				continue
			case "huge": // an answer of 8 KiB, more than the tests' limit
				out.Write(codec.AppendResult(nil, m.ID, []byte(`{"pad":"`+strings.Repeat("x", 8<<10)+`"}`)))
				out.WriteByte('\n')
				out.Flush()
				continue
			}
			result = `{"content":[{"type":"text","text":"pid ` + fmt.Sprint(os.Getpid()) + `"}]}`
		default:
			out.Write(codec.AppendError(nil, m.ID, codec.CodeMethodNotFound, "no such method", nil))
			out.WriteByte('\n')
			out.Flush()
			continue
		}
		out.Write(codec.AppendResult(nil, m.ID, []byte(result)))
		out.WriteByte('\n')
		out.Flush()
	}
	if mode == "stubborn" {
		time.Sleep(time.Hour)
	}
	return 0
}

// spawnSleeper starts a grandchild in mode sleep and writes its pid to $PIDFILE;
// escape puts it in a process group of its own, holding the child's stdin.
func spawnSleeper(escape bool) error {
	gc := exec.Command(os.Args[0], "-test.run=^$")
	gc.Env = append(os.Environ(), childEnv+"=sleep")
	if escape {
		gc.Stdin = os.Stdin
		setProcGroup(gc)
	}
	if err := gc.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "spawn failed:", err)
		return err
	}
	return os.WriteFile(os.Getenv("PIDFILE"), []byte(fmt.Sprint(gc.Process.Pid)), 0o600)
}

// referenceEnded is what the reference child mode writes to stderr once it has served
// its stdin to the end.
const referenceEnded = "reference backend: stdin ended and its calls are done"

// runReference serves the reference backend on stdio; a backend that, once its stdin
// ends, writes the replies to the calls it is running before it exits.
func runReference() int {
	s, err := server.New(server.Config{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := s.ServeStdio(context.Background(), os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Fprintln(os.Stderr, referenceEnded)
	return 0
}

// resultText extracts the first text content of a tools/call result, for assertions.
func resultText(t testing.TB, msg []byte) string {
	t.Helper()
	i := bytes.Index(msg, []byte(`"text":"`))
	if i < 0 {
		t.Fatalf("no text content in %s", msg)
	}
	rest := msg[i+len(`"text":"`):]
	return string(rest[:bytes.IndexByte(rest, '"')])
}

func mustContain(t testing.TB, b []byte, sub string) {
	t.Helper()
	if !strings.Contains(string(b), sub) {
		t.Fatalf("%s does not contain %q", b, sub)
	}
}

// dialHTTP dials url with opts and a fresh recSink, failing the test on an error. The
// caller closes the Conn (before the test server, which waits for its connections).
func dialHTTP(t *testing.T, url string, opts HTTPOptions) (*HTTPConn, *recSink) {
	t.Helper()
	s := newRecSink()
	c, err := DialHTTP(testCtx(t), url, opts, s)
	if err != nil {
		t.Fatal(err)
	}
	return c, s
}
