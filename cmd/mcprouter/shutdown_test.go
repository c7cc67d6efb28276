package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcprouter/mcprouter/internal/mcpraw"
	"github.com/mcprouter/mcprouter/internal/testbin"
	"github.com/mcprouter/mcprouter/internal/testwait"
)

// TestSignalShutdownInFlight: SIGTERM while a tool call is in flight (forwarded to a
// real backend, streaming progress): the router stops accepting connections, the call
// still completes, the client's GET stream ends with a retry hint, and the process
// exits 0.
func TestSignalShutdownInFlight(t *testing.T) {
	p := startRouter(t, "--backend", "b=cmd:"+backendBin(t)+" stdio")
	progress := make(chan struct{}, 64)
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) { offer(progress, struct{}{}) },
	})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: p.url("/mcp"), MaxRetries: -1, DisableStandaloneSSE: true}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, p.Log)
	}
	defer cs.Close()

	// A raw GET stream on a session of its own, to see how it ends.
	stream := openRawStream(t, p)

	done := progressCall(ctx, cs, "b__progress", "tok", 8)
	select {
	case <-progress:
	case o := <-done:
		t.Fatalf("the call ended before any progress: %+v %v\n%s", o.res, o.err, p.Log)
	case <-time.After(testTimeout):
		t.Fatalf("no progress from the backend\n%s", p.Log)
	}

	if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// New connections are refused soon after the signal.
	testwait.For(t, "the router to refuse connections after SIGTERM", testTimeout, func() bool {
		c, err := net.DialTimeout("tcp", p.Addr(), time.Second)
		if err != nil {
			return true
		}
		c.Close()
		return false
	})

	o := <-done
	if o.err != nil {
		t.Fatalf("in-flight call failed at shutdown: %v\n%s", o.err, p.Log)
	}
	if o.res.IsError {
		t.Fatalf("in-flight call returned an error result: %+v", o.res)
	}
	raw, _ := io.ReadAll(stream)
	if !strings.HasSuffix(string(raw), "retry: 1000\n\n") {
		t.Errorf("the GET stream did not end with a retry hint: %q", raw)
	}
	waitCleanExit(t, p.Exited(), p.Cmd, p.Log)
	if !p.Log.Contains("stopped") {
		t.Errorf("no \"stopped\" log line\n%s", p.Log)
	}
}

// openRawStream initializes a 2025-06-18 session with plain HTTP and opens its GET
// stream.
func openRawStream(t *testing.T, p *routerProc) io.ReadCloser {
	t.Helper()
	sid, _ := rawInitialize(t, p)
	stream, err := getStream(context.Background(), p, sid)
	if err != nil || stream.StatusCode != 200 {
		t.Fatalf("GET stream: %v %v", err, stream)
	}
	t.Cleanup(func() { stream.Body.Close() })
	return stream.Body
}

// getStream opens the GET stream of a 2025-06-18 session, for as long as ctx lasts.
func getStream(ctx context.Context, p *routerProc, sid string) (*http.Response, error) {
	c := &mcpraw.Client{URL: p.url("/mcp"), Version: "2025-06-18", Session: sid}
	return c.Do(c.NewRequest(ctx, http.MethodGet, ""))
}

// stdioProc is `mcprouter stdio` with its three standard streams in the test's hands.
type stdioProc struct {
	Cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Scanner
	Log    *testbin.Log // stderr
	exited chan struct{}
}

// Exited is closed once the process has exited.
func (p *stdioProc) Exited() <-chan struct{} { return p.exited }

func startStdio(t *testing.T, args ...string) *stdioProc {
	t.Helper()
	cmd := exec.Command(routerBin(t), append([]string{"stdio"}, args...)...)
	in, out := testbin.Pipes(t, cmd)
	p := &stdioProc{Cmd: cmd, in: in, out: bufio.NewScanner(out), Log: new(testbin.Log), exited: make(chan struct{})}
	cmd.Stderr = p.Log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		in.Close()
		select {
		case <-p.Exited():
		case <-time.After(testTimeout):
			cmd.Process.Kill()
			<-p.Exited()
		}
	})
	return p
}

// lines reads stdout until EOF (with a timeout) and returns its lines.
func (p *stdioProc) lines(t *testing.T, n int) []string {
	t.Helper()
	ch := make(chan []string, 1)
	go func() {
		var ls []string
		for (n < 0 || len(ls) < n) && p.out.Scan() {
			ls = append(ls, p.out.Text())
		}
		ch <- ls
	}()
	select {
	case ls := <-ch:
		return ls
	case <-time.After(testTimeout):
		t.Fatalf("timed out reading stdout\n%s", p.Log)
		return nil
	}
}

func (p *stdioProc) waitExit(t *testing.T) {
	t.Helper()
	waitCleanExit(t, p.Exited(), p.Cmd, p.Log)
}

// waitCleanExit waits for a process that must end on its own, and checks that it
// exited 0.
func waitCleanExit(t *testing.T, exited <-chan struct{}, cmd *exec.Cmd, log *testbin.Log) {
	t.Helper()
	select {
	case <-exited:
	case <-time.After(testTimeout):
		t.Fatalf("mcprouter did not exit\n%s", log)
	}
	if !cmd.ProcessState.Success() {
		t.Errorf("exit status %v\n%s", cmd.ProcessState, log)
	}
}

// TestStdioOnlyJSONOnStdout: stdout carries only JSON-RPC lines, logs go to stderr, and
// a shutdown request ends the process although stdin stays open.
func TestStdioOnlyJSONOnStdout(t *testing.T) {
	p := startStdio(t, "--log-level", "debug")
	for _, l := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":3,"method":"shutdown"}`,
	} {
		io.WriteString(p.in, l+"\n")
	}
	lines := p.lines(t, -1)
	want := []string{`"id":1,"result":{"protocolVersion":"2025-06-18"`, `{"jsonrpc":"2.0","id":2,"result":{}}`, `{"jsonrpc":"2.0","id":3,"result":{}}`}
	if len(lines) != len(want) {
		t.Fatalf("stdout lines %q, want %d\n%s", lines, len(want), p.Log)
	}
	for i, l := range lines {
		if !json.Valid([]byte(l)) || !strings.Contains(l, want[i]) {
			t.Errorf("stdout line %d: %s, want %s", i, l, want[i])
		}
	}
	p.waitExit(t)
	if p.Log.String() == "" {
		t.Errorf("no logs on stderr at debug level")
	}
}

// TestStdioSignal: SIGTERM while stdin is open and idle ends `mcprouter stdio` cleanly.
func TestStdioSignal(t *testing.T) {
	p := startStdio(t)
	io.WriteString(p.in, `{"jsonrpc":"2.0","id":1,"method":"ping"}`+"\n")
	if got := p.lines(t, 1); len(got) != 1 || got[0] != `{"jsonrpc":"2.0","id":1,"result":{}}` {
		t.Fatalf("ping: %q", got)
	}
	p.Cmd.Process.Signal(syscall.SIGTERM)
	p.waitExit(t)
}

// TestConfiguredSessionLimits: sessions.max and sessions.idle_timeout from a
// configuration file, with their errors as clients see them. A client holding a GET
// stream open is active, so the sessions that fill the table are pinned by their
// streams however slow the machine is: the refusal past sessions.max cannot be undone
// by an expiry, and the expiry is shown on a session of its own.
func TestConfiguredSessionLimits(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "mcprouter.yaml")
	if err := os.WriteFile(cfg, []byte("sessions:\n  max: 2\n  idle_timeout: 300ms\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startRouter(t, "--config", cfg)
	_, stopA := pinnedSession(t, p)
	defer stopA()
	// An idle session expires after idle_timeout: its id is then 404.
	idle, body := rawInitialize(t, p)
	if idle == "" {
		t.Fatalf("initialize under the limit: %s", body)
	}
	deadline := time.Now().Add(testTimeout)
	for {
		if _, status, _ := rawPost(t, http.DefaultClient, p.url("/mcp"), idle, bothAccept, `{"jsonrpc":"2.0","id":2,"method":"ping"}`); status == http.StatusNotFound {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("session did not expire")
		}
		// Each ping is activity: pause longer than idle_timeout before the next one.
		time.Sleep(450 * time.Millisecond)
	}
	// Its place is free again; with both places held by active sessions, a third is
	// refused.
	_, stopB := pinnedSession(t, p)
	defer stopB()
	if sid, body := rawInitialize(t, p); sid != "" || !strings.Contains(body, "too many sessions") {
		t.Errorf("past sessions.max: session %q body %s", sid, body)
	}
}

// rawInitialize opens a 2025-06-18 session with plain HTTP: its id ("" when refused)
// and the response body.
func rawInitialize(t *testing.T, p *routerProc) (string, string) {
	t.Helper()
	sid, _, body := rawPost(t, http.DefaultClient, p.url("/mcp"), "", bothAccept, initBody("{}"))
	return sid, body
}

// pinnedSession opens a session, completes its handshake and holds its GET stream
// open; stop ends the stream. A session that expired before its stream opened (a
// stalled machine) is replaced by a new one, until testTimeout.
func pinnedSession(t *testing.T, p *routerProc) (sid string, stop func()) {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for time.Now().Before(deadline) {
		sid, body := rawInitialize(t, p)
		if sid == "" { // the table still holds a session that expired: it goes soon
			if !strings.Contains(body, "too many sessions") {
				t.Fatalf("initialize: %s", body)
			}
			time.Sleep(20 * time.Millisecond)
			continue
		}
		rawPost(t, http.DefaultClient, p.url("/mcp"), sid, bothAccept, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		ctx, cancel := context.WithCancel(context.Background())
		resp, err := getStream(ctx, p, sid)
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		if resp.StatusCode == http.StatusOK {
			return sid, func() { cancel(); resp.Body.Close() }
		}
		resp.Body.Close()
		cancel()
		if resp.StatusCode != http.StatusNotFound {
			t.Fatalf("GET stream: %d", resp.StatusCode)
		}
	}
	t.Fatal("no session lived long enough to open its stream")
	return "", nil
}
