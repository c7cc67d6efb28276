package transport

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/mcprouter/mcprouter/internal/testwait"
)

// stdioClient runs ServeStdio on pipes: the test writes the client's stdin and reads
// its stdout line by line.
type stdioClient struct {
	t      *testing.T
	in     *io.PipeWriter
	out    *bufio.Scanner
	outR   *io.PipeReader
	h      *testHandler
	reg    *Registry
	cancel context.CancelFunc
	done   chan error
}

func newStdioClient(t *testing.T, cfg StdioConfig) *stdioClient {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	h := newTestHandler()
	reg := NewRegistry(RegistryConfig{}, h)
	ctx, cancel := context.WithCancel(context.Background())
	c := &stdioClient{t: t, in: inW, outR: outR, out: bufio.NewScanner(outR), h: h, reg: reg, cancel: cancel, done: make(chan error, 1)}
	c.out.Buffer(nil, 8<<20)
	go func() {
		err := ServeStdio(ctx, cfg, reg, h, inR, outW)
		outW.Close()
		c.done <- err
	}()
	t.Cleanup(func() {
		select {
		case <-h.release:
		default:
			close(h.release)
		}
		cancel()
		inW.Close()
		inR.Close()
		outR.Close()
		reg.Close()
	})
	return c
}

func (c *stdioClient) send(lines ...string) {
	c.t.Helper()
	for _, l := range lines {
		if _, err := io.WriteString(c.in, l+"\n"); err != nil {
			c.t.Fatalf("write %q: %v", l, err)
		}
	}
}

// recv reads one line of stdout, with a timeout.
func (c *stdioClient) recv() string {
	c.t.Helper()
	line := make(chan string, 1)
	go func() {
		if c.out.Scan() {
			line <- c.out.Text()
		} else {
			line <- "EOF"
		}
	}()
	return testwait.Recv(c.t, "a line of stdout", waitLimit, line)
}

// wait waits for ServeStdio to return.
func (c *stdioClient) wait() error {
	c.t.Helper()
	return testwait.Recv(c.t, "ServeStdio to return", waitLimit, c.done)
}

func TestStdio(t *testing.T) {
	c := newStdioClient(t, StdioConfig{MaxMessage: 1 << 10, MaxBatch: 3})
	rows := []struct{ send, want string }{
		{`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}`, `{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-06-18"`},
		{`{"jsonrpc":"2.0","id":2,"method":"ping"}`, `{"jsonrpc":"2.0","id":2,"result":{}}`},
		{`[{"jsonrpc":"2.0","id":3,"method":"ping"},{"jsonrpc":"2.0","method":"n"}]`, `[{"jsonrpc":"2.0","id":3,"result":{}}]`},
		{`[{"jsonrpc":"2.0","id":4,"method":"ping"},1]`, `-32600`},
		{`{"jsonrpc":"2.0",]`, `-32700`},
		{`{"jsonrpc":"2.0","id":5,"method":"echo","params":{"x":"` + strings.Repeat("a", 2000) + `"}}`, `-326`},
		{`[{"jsonrpc":"2.0","method":"n"},{"jsonrpc":"2.0","method":"n"},{"jsonrpc":"2.0","method":"n"},{"jsonrpc":"2.0","id":6,"method":"ping"}]`, `batch too long: at most 3 elements`},
		{`{"jsonrpc":"2.0","id":7,"method":"progress","params":{"count":1}}`, `"progress":0`},
		{``, `{"jsonrpc":"2.0","id":7,"result":{"sent":1}}`},
		{`  {"jsonrpc":"2.0","id":8,"method":"ping"}  `, `{"jsonrpc":"2.0","id":8,"result":{}}`},
	}
	for _, r := range rows {
		if r.send != "" {
			c.send(r.send)
		}
		got := c.recv()
		if !strings.Contains(got, r.want) {
			t.Errorf("sent %.60s: got %.200s, want %s", r.send, got, r.want)
		}
		if !json.Valid([]byte(got)) {
			t.Errorf("stdout line is not JSON: %q", got)
		}
	}
	// Notifications get nothing: the next line is the ping's reply.
	c.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, `{"jsonrpc":"2.0","id":9,"method":"ping"}`)
	if got := c.recv(); got != `{"jsonrpc":"2.0","id":9,"result":{}}` {
		t.Errorf("after a notification: %s", got)
	}
	c.in.Close()
	if err := c.wait(); err != nil {
		t.Errorf("ServeStdio at EOF: %v", err)
	}
	if c.reg.Len() != 0 {
		t.Errorf("session left after EOF")
	}
}

// TestStdioEOFWaitsForReplies: stdin closes while a request is in flight; its reply is
// still written before ServeStdio returns.
func TestStdioEOFWaitsForReplies(t *testing.T) {
	c := newStdioClient(t, StdioConfig{})
	c.send(`{"jsonrpc":"2.0","id":1,"method":"hold"}`)
	waitFor(t, "the request to be held", func() bool { return c.h.holdingCount() == 1 })
	c.in.Close()
	close(c.h.release)
	if got := c.recv(); got != `{"jsonrpc":"2.0","id":1,"result":{"held":true}}` {
		t.Errorf("reply after EOF: %s", got)
	}
	if err := c.wait(); err != nil {
		t.Errorf("ServeStdio: %v", err)
	}
}

// TestStdioCancel: the context ends while stdin is idle (a blocked read): ServeStdio
// returns, after the replies in flight.
func TestStdioCancel(t *testing.T) {
	c := newStdioClient(t, StdioConfig{})
	c.send(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	c.recv()
	c.send(`{"jsonrpc":"2.0","id":2,"method":"hold"}`)
	waitFor(t, "the request to be held", func() bool { return c.h.holdingCount() == 1 })
	c.cancel()
	close(c.h.release)
	if got := c.recv(); !strings.Contains(got, `"id":2`) {
		t.Errorf("in-flight reply at cancel: %s", got)
	}
	if err := c.wait(); !errors.Is(err, context.Canceled) {
		t.Errorf("ServeStdio: %v, want context.Canceled", err)
	}
}

// TestStdioSessionClosed: the handler ends the session (a shutdown request): ServeStdio
// returns although stdin stays open.
func TestStdioSessionClosed(t *testing.T) {
	c := newStdioClient(t, StdioConfig{})
	c.send(`{"jsonrpc":"2.0","id":1,"method":"close"}`)
	if got := c.recv(); got != `{"jsonrpc":"2.0","id":1,"result":{}}` {
		t.Errorf("reply to close: %s", got)
	}
	if err := c.wait(); err != nil {
		t.Errorf("ServeStdio: %v", err)
	}
	if got := c.recv(); got != "EOF" {
		t.Errorf("stdout after the session ended: %q, want EOF", got)
	}
}

// TestStdioOverflow: a client that does not read stdout is cut off once MaxQueue bytes
// wait, instead of the server buffering without bound.
func TestStdioOverflow(t *testing.T) {
	c := newStdioClient(t, StdioConfig{MaxQueue: 64 << 10})
	// One reply blocks the writer (nobody reads the pipe); the next ones fill the queue.
	for i := 0; i < 64; i++ {
		c.send(`{"jsonrpc":"2.0","id":1,"method":"broadcast","params":{"count":4,"size":1024}}`)
	}
	c.outR.Close() // the client is gone for good
	if err := c.wait(); !errors.Is(err, ErrStdioOverflow) && !errors.Is(err, io.ErrClosedPipe) {
		t.Errorf("ServeStdio: %v, want ErrStdioOverflow", err)
	}
}
