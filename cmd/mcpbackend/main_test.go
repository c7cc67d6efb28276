package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcprouter/mcprouter/cmd/mcpbackend/mcpbackendtest"
	"github.com/mcprouter/mcprouter/internal/testbin"
)

func TestMain(m *testing.M) { testbin.Main(m) }

var checkOpts = mcpbackendtest.CheckOptions{ExtraTools: 60, PageSize: 25}

func backendArgs(extra ...string) []string {
	return append(extra, "--tools", "60", "--page-size", "25", "--tick", "1h")
}

// TestProcessStdio runs the command as a child process speaking stdio, as an MCP host
// would, and drives it with the SDK's CommandTransport.
func TestProcessStdio(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*mcpbackendtest.Wait)
	defer cancel()
	cmd := exec.Command(testbin.Build(t, testbin.Backend), backendArgs("stdio")...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	c := mcpbackendtest.Connect(t, ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 5 * time.Second}, "")
	mcpbackendtest.Check(t, ctx, c, checkOpts)
	if err := c.Session.Close(); err != nil {
		t.Logf("close: %v", err)
	}
	// Closing stdin ends the process cleanly.
	if cmd.ProcessState == nil || !cmd.ProcessState.Success() {
		t.Errorf("process state %v; stderr:\n%s", cmd.ProcessState, stderr.String())
	}
}

// TestProcessStdioSignal checks that SIGTERM ends a stdio backend whose client keeps
// stdin open and silent (a read of stdin cannot be interrupted).
func TestProcessStdioSignal(t *testing.T) {
	cmd := exec.Command(testbin.Build(t, testbin.Backend), "stdio", "--tick", "0")
	stdin, stdout := testbin.Pipes(t, cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	exited := make(chan error, 1)
	pong := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		pong <- line
		io.Copy(io.Discard, stdout)
		exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill() // by PID: only the process this test started
		}
	})
	if _, err := io.WriteString(stdin, `{"jsonrpc":"2.0","id":1,"method":"ping"}`+"\n"); err != nil {
		t.Fatal(err)
	}
	select { // the answer proves the backend is up and reading
	case line := <-pong:
		if strings.TrimSpace(line) != `{"jsonrpc":"2.0","id":1,"result":{}}` {
			t.Fatalf("ping: %q", line)
		}
	case <-time.After(mcpbackendtest.Wait):
		t.Fatal("no answer to ping")
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v", err)
		}
	case <-time.After(mcpbackendtest.Wait):
		t.Fatal("the stdio backend did not exit after SIGTERM")
	}
}

// TestProcessHTTP runs the command listening on a free loopback port and drives it over
// Streamable HTTP and legacy SSE, then stops it with SIGTERM.
func TestProcessHTTP(t *testing.T) {
	p := testbin.Start(t, testbin.Spec{Bin: testbin.Build(t, testbin.Backend), Args: backendArgs("--listen", "127.0.0.1:0", "--name", "proc-test"),
		Ready: []string{"mcpbackend listening"}, Wait: mcpbackendtest.Wait})
	addr := p.Addr()

	ctx, cancel := context.WithTimeout(context.Background(), 2*mcpbackendtest.Wait)
	defer cancel()
	for _, tr := range []struct {
		name string
		t    mcp.Transport
	}{
		{"streamable", &mcp.StreamableClientTransport{Endpoint: "http://" + addr + "/mcp", MaxRetries: -1}},
		{"sse", &mcp.SSEClientTransport{Endpoint: "http://" + addr + "/sse"}},
	} {
		t.Run(tr.name, func(t *testing.T) {
			c := mcpbackendtest.Connect(t, ctx, tr.t, "")
			if got := c.Session.InitializeResult().ServerInfo.Name; got != "proc-test" {
				t.Errorf("server name %q, want proc-test (--name)", got)
			}
			mcpbackendtest.Check(t, ctx, c, checkOpts)
			c.Session.Close()
		})
	}

	if !p.Stop(mcpbackendtest.Wait) {
		t.Fatal("the backend did not exit after SIGTERM")
	}
	if err := p.Err(); err != nil {
		t.Fatalf("exit after SIGTERM: %v", err)
	}
}

func TestFlags(t *testing.T) {
	cases := []struct {
		args []string
		want int
	}{
		{[]string{"--no-such-flag"}, 2},
		{[]string{"--page-size", "0"}, 2},
		{[]string{"--tools", "-1"}, 2},
		{[]string{"--log-level", "loud"}, 2},
		{[]string{"extra-arg"}, 2},
		{[]string{"--listen", "127.0.0.1:99999"}, 1},
	}
	for _, c := range cases {
		var stderr bytes.Buffer
		if got := run(c.args, strings.NewReader(""), io.Discard, &stderr); got != c.want {
			t.Errorf("run(%q) = %d, want %d; stderr: %s", c.args, got, c.want, stderr.String())
		}
	}
	// stdio with an empty stdin serves nothing and exits cleanly.
	var stdout, stderr bytes.Buffer
	if got := run([]string{"stdio", "--tick", "0"}, strings.NewReader(""), &stdout, &stderr); got != 0 || stdout.Len() != 0 {
		t.Errorf("stdio on empty input: %d, stdout %q, stderr %s", got, stdout.String(), stderr.String())
	}
	// One ping over stdio.
	stdout.Reset()
	if got := run([]string{"stdio"}, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`+"\n"), &stdout, &stderr); got != 0 ||
		strings.TrimSpace(stdout.String()) != `{"jsonrpc":"2.0","id":1,"result":{}}` {
		t.Errorf("stdio ping: %d, %q", got, stdout.String())
	}
}
