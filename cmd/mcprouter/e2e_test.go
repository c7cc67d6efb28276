package main

// End-to-end tests: mcprouter is built once per test binary and started as a real process
// on loopback; the official Go SDK client and mcp-go connect to it over Streamable HTTP,
// legacy HTTP+SSE and stdio, initialize at each revision, ping, and end the session.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	mcpgoclient "github.com/mark3labs/mcp-go/client"
	mcpgotransport "github.com/mark3labs/mcp-go/client/transport"
	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// routerBin is the mcprouter binary built by TestMain; backendBin the reference
// backend (cmd/mcpbackend), for tests that need requests that take time.
var routerBin, backendBin string

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "mcprouter-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: temp dir:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	routerBin = filepath.Join(dir, "mcprouter")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	backendBin = filepath.Join(dir, "mcpbackend")
	for bin, pkg := range map[string]string{routerBin: ".", backendBin: "../mcpbackend"} {
		build := exec.CommandContext(ctx, "go", "build", "-o", bin, pkg)
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: go build", pkg+":", err)
			return 1
		}
	}
	return m.Run()
}

// testTimeout bounds every client operation of these tests.
const testTimeout = 30 * time.Second

// routerProc is a running mcprouter process.
type routerProc struct {
	cmd    *exec.Cmd
	addr   string // host:port of the MCP listener
	stderr *lockedBuffer
	exited chan struct{}
	err    error // Wait's result, set before exited closes
}

func (p *routerProc) url(path string) string { return "http://" + p.addr + path }

// startRouter starts mcprouter listening on an ephemeral loopback port and waits for its
// "listening" log line. The process is stopped (SIGTERM, then SIGKILL) at cleanup.
func startRouter(t testing.TB, args ...string) *routerProc {
	t.Helper()
	return startRouterBin(t, routerBin, args...)
}

// startRouterBin is startRouter with another mcprouter binary (an older build, to
// compare with).
func startRouterBin(t testing.TB, bin string, args ...string) *routerProc {
	t.Helper()
	args = append([]string{"--listen", "127.0.0.1:0"}, args...)
	cmd := exec.Command(bin, args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &routerProc{cmd: cmd, stderr: new(lockedBuffer), exited: make(chan struct{})}
	addrCh := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sent := false
		for sc.Scan() {
			line := sc.Text()
			p.stderr.WriteLine(line)
			if !sent && strings.Contains(line, "mcprouter listening") {
				if a := logValue(line, "addr"); a != "" {
					addrCh <- a
					sent = true
				}
			}
		}
		io.Copy(io.Discard, stderr)
		p.err = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() { p.stop(t) })
	select {
	case p.addr = <-addrCh:
	case <-p.exited:
		t.Fatalf("mcprouter exited before listening: %v\n%s", p.err, p.stderr)
	case <-time.After(testTimeout):
		t.Fatalf("mcprouter did not log its address in time\n%s", p.stderr)
	}
	return p
}

// stop ends the process if it is still running: SIGTERM, then SIGKILL after a timeout.
func (p *routerProc) stop(t testing.TB) {
	select {
	case <-p.exited:
		return
	default:
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(testTimeout):
		p.cmd.Process.Kill()
		<-p.exited
		t.Errorf("mcprouter did not stop on SIGTERM\n%s", p.stderr)
	}
}

// logValue extracts key=value from a slog text line.
func logValue(line, key string) string {
	i := strings.Index(line, " "+key+"=")
	if i < 0 {
		return ""
	}
	v := line[i+len(key)+2:]
	if j := strings.IndexByte(v, ' '); j >= 0 {
		v = v[:j]
	}
	return strings.Trim(v, `"`)
}

// sessionRevisions are the revisions negotiated through initialize.
var sessionRevisions = []string{"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"}

func goSDKClient() *mcp.Client {
	return mcp.NewClient(&mcp.Implementation{Name: "e2e-go-sdk", Version: "1"}, nil)
}

// goSDKSession connects, checks the negotiated revision, pings and closes.
func goSDKSession(t *testing.T, tr mcp.Transport, requested, want string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	cs, err := goSDKClient().Connect(ctx, tr, &mcp.ClientSessionOptions{ProtocolVersion: requested})
	if err != nil {
		t.Fatalf("connect (requested %q): %v", requested, err)
	}
	res := cs.InitializeResult()
	if res.ProtocolVersion != want {
		t.Errorf("negotiated %q, want %q", res.ProtocolVersion, want)
	}
	if res.ServerInfo == nil || res.ServerInfo.Name != "mcprouter" {
		t.Errorf("serverInfo = %+v, want name mcprouter", res.ServerInfo)
	}
	for i := 0; i < 3; i++ {
		if err := cs.Ping(ctx, nil); err != nil {
			t.Fatalf("ping %d: %v", i, err)
		}
	}
	if err := cs.Close(); err != nil && !errors.Is(err, mcp.ErrConnectionClosed) {
		t.Errorf("close: %v", err)
	}
}

func TestGoSDKStreamable(t *testing.T) {
	p := startRouter(t)
	for _, v := range append(sessionRevisions, "") {
		name, want := v, v
		if v == "" {
			name, want = "default", "2025-11-25" // the SDK tries server/discover, then initialize
		}
		t.Run(name, func(t *testing.T) {
			goSDKSession(t, &mcp.StreamableClientTransport{Endpoint: p.url("/mcp"), MaxRetries: -1}, v, want)
		})
	}
}

func TestGoSDKLegacySSE(t *testing.T) {
	p := startRouter(t)
	for _, v := range sessionRevisions {
		t.Run(v, func(t *testing.T) {
			goSDKSession(t, &mcp.SSEClientTransport{Endpoint: p.url("/sse")}, v, v)
		})
	}
}

func TestGoSDKStdio(t *testing.T) {
	for _, v := range sessionRevisions {
		t.Run(v, func(t *testing.T) {
			cmd := exec.Command(routerBin, "stdio")
			stderr := new(lockedBuffer)
			cmd.Stderr = stderr
			goSDKSession(t, &mcp.CommandTransport{Command: cmd, TerminateDuration: testTimeout}, v, v)
			// Close closed stdin: the process must have ended on its own, cleanly.
			if cmd.ProcessState == nil || !cmd.ProcessState.Success() {
				t.Errorf("mcprouter stdio did not exit cleanly: %v\n%s", cmd.ProcessState, stderr)
			}
		})
	}
}

// mcpgoSession initializes an mcp-go client at the requested revision, pings and closes.
func mcpgoSession(t *testing.T, c *mcpgoclient.Client, requested, want string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	defer c.Close()
	if err := c.Start(ctx); err != nil {
		t.Fatalf("start: %v", err)
	}
	req := mcpgo.InitializeRequest{}
	req.Params.ProtocolVersion = requested
	req.Params.ClientInfo = mcpgo.Implementation{Name: "e2e-mcp-go", Version: "1"}
	res, err := c.Initialize(ctx, req)
	if err != nil {
		t.Fatalf("initialize (requested %q): %v", requested, err)
	}
	if res.ProtocolVersion != want {
		t.Errorf("negotiated %q, want %q", res.ProtocolVersion, want)
	}
	if res.ServerInfo.Name != "mcprouter" {
		t.Errorf("serverInfo.name = %q, want mcprouter", res.ServerInfo.Name)
	}
	for i := 0; i < 3; i++ {
		if err := c.Ping(ctx); err != nil {
			t.Fatalf("ping %d: %v", i, err)
		}
	}
}

func TestMCPGoStreamable(t *testing.T) {
	p := startRouter(t)
	for _, v := range append(sessionRevisions, "") {
		name, want := v, v
		if v == "" {
			name, want = "default", "2025-11-25"
		}
		t.Run(name, func(t *testing.T) {
			c, err := mcpgoclient.NewStreamableHttpClient(p.url("/mcp"), mcpgotransport.WithHTTPTimeout(testTimeout))
			if err != nil {
				t.Fatal(err)
			}
			mcpgoSession(t, c, v, want)
		})
	}
}

func TestMCPGoLegacySSE(t *testing.T) {
	p := startRouter(t)
	for _, v := range sessionRevisions {
		t.Run(v, func(t *testing.T) {
			c, err := mcpgoclient.NewSSEMCPClient(p.url("/sse"), mcpgotransport.WithHTTPClient(&http.Client{}))
			if err != nil {
				t.Fatal(err)
			}
			mcpgoSession(t, c, v, v)
		})
	}
}

func TestMCPGoStdio(t *testing.T) {
	for _, v := range sessionRevisions {
		t.Run(v, func(t *testing.T) {
			c, err := mcpgoclient.NewStdioMCPClient(routerBin, nil, "stdio")
			if err != nil {
				t.Fatal(err)
			}
			mcpgoSession(t, c, v, v)
		})
	}
}
