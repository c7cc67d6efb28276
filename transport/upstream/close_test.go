package upstream

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/mcprouter/mcprouter/cmd/mcpbackend/mcpbackendtest"
	"github.com/mcprouter/mcprouter/cmd/mcpbackend/server"
	"github.com/mcprouter/mcprouter/transport"
)

// holdingBackend is an official Go SDK backend with one tool, "hold", that sends a
// progress notification and then runs until release is closed. Its DELETE answers only
// once the session's calls in flight have ended, as the SDK's does.
func holdingBackend(t *testing.T) (sw *swapHandler, url string) {
	release := make(chan struct{})
	srv := mcp.NewServer(&mcp.Implementation{Name: "holding", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "hold"}, func(ctx context.Context, req *mcp.CallToolRequest, _ any) (*mcp.CallToolResult, any, error) {
		req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(), Progress: 1})
		select {
		case <-release:
		case <-ctx.Done():
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "released"}}}, nil, nil
	})
	sw = &swapHandler{}
	sw.set(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	hs := httptest.NewServer(sw)
	t.Cleanup(func() {
		close(release) // before the server's Close, which waits for its handlers
		hs.Close()
	})
	return sw, hs.URL
}

// TestHTTPCloseWithCallInFlight: closing a Conn while one of its calls is in flight,
// its SSE reply stream open and the backend still working on it, ends the call with
// ErrClosed, stops the GET stream, and still sends the DELETE; Close does not wait for
// the DELETE's answer that the backend holds until its call ends, nor, when the
// streams hold every connection the pool may have (MaxConns), for a free one. Before,
// Close sent the DELETE first and closed the streams only after it: the DELETE waited
// closeWait for its answer (or for a connection), and the call and the GET stream with
// it (Close took 5 s).
//
// With waiter, a second call waits for a free connection (MaxConns 1) when Close
// begins: it ends with ErrClosed too. Before, it took the slot of the connection Close
// closed, dialed and sent its call, whose stream then held the pool's only slot
// against the DELETE: Close took closeWait and failed with the DELETE's timeout, which
// never reached the backend.
func TestHTTPCloseWithCallInFlight(t *testing.T) {
	for _, tc := range []struct {
		pipeline, maxConns int // maxConns: as many as the streams, so none is free
		stream, waiter     bool
	}{
		{0, 0, false, false}, {0, 0, true, false}, {1, 0, false, false}, {1, 0, true, false},
		{0, 1, false, false}, {0, 2, true, false}, {0, 1, false, true}, {0, 2, true, true},
	} {
		name := fmt.Sprintf("pipeline=%d/maxConns=%d/stream=%v/waiter=%v", tc.pipeline, tc.maxConns, tc.stream, tc.waiter)
		t.Run(name, func(t *testing.T) {
			sw, url := holdingBackend(t)
			c, s := dialHTTP(t, url, HTTPOptions{Pipeline: tc.pipeline, MaxConns: tc.maxConns})
			doHandshake(t, c, s)
			if tc.stream {
				c.StartStream()
				s.waitFor(t, "the GET stream", func() bool { return sw.gets.Load() > 0 })
			}
			sent := make(chan error, 2)
			go func() {
				sent <- c.Send(context.Background(), []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call",`+
					`"params":{"name":"hold","arguments":{},"_meta":{"progressToken":"p"}}}`))
			}()
			s.waitFor(t, "the call's progress", func() bool {
				s.mu.Lock()
				defer s.mu.Unlock()
				return len(s.msgs) > 1 // the initialize result, then the progress
			})
			calls := 1
			if tc.waiter {
				calls++
				go func() {
					sent <- c.Send(context.Background(), []byte(`{"jsonrpc":"2.0","id":8,"method":"tools/call",`+
						`"params":{"name":"hold","arguments":{}}}`))
				}()
				waitGoroutine(t, "fasthttp.(*HostClient).AcquireConn")
			}
			closed := make(chan error, 1)
			go func() { closed <- c.Close() }()
			// What fails the old Close is its error, not its time: its DELETE waited
			// for an answer (or a connection) that could not come while the call held,
			// and Close returned the timeout. The wait below is a hang guard only.
			select {
			case err := <-closed:
				if err != nil {
					t.Fatalf("Close: %v (a DELETE sent and not answered yet is no error)", err)
				}
			case <-time.After(waitLimit):
				t.Fatal("Close did not return: its DELETE waited for its answer, which the backend holds until its call ends, or for a connection")
			}
			for range calls {
				wantClosed(t, sent, "a call in flight")
			}
			// Close may have stopped waiting before the backend's handler took the
			// DELETE it was sent.
			s.waitFor(t, "the DELETE", func() bool { return sw.deletes.Load() > 0 })
			if n := sw.deletes.Load(); n != 1 {
				t.Fatalf("the backend got %d DELETEs, want 1", n)
			}
			noLeaks(t)
		})
	}
}

// natsRefBackend serves the reference backend as a NATS service named service on an
// in-process NATS server, and returns a connection for the router's side.
func natsRefBackend(t *testing.T, service string) *nats.Conn {
	t.Helper()
	ns, err := natsserver.NewServer(&natsserver.Options{DontListen: true, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(waitLimit) {
		t.Fatal("NATS server not ready")
	}
	t.Cleanup(ns.Shutdown)
	connect := func() *nats.Conn {
		nc, err := nats.Connect("", nats.InProcessServer(ns))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		return nc
	}
	b := mcpbackendtest.Start(t, server.Config{})
	svc, err := transport.ServeNATS(connect(), transport.NATSServeConfig{Service: service}, b.Registry(), b)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Stop() })
	return connect()
}

// TestNATSCloseWithCallInFlight: closing a NATSConn while one of its calls waits for
// the backend's answer (a tool call that runs for a minute, sending progress) ends the
// call with ErrClosed. Before, NATS's request knew only the caller's context: the call
// waited for the answer or its own deadline, whichever came first (here its deadline:
// it ended with context.DeadlineExceeded).
func TestNATSCloseWithCallInFlight(t *testing.T) {
	nc := natsRefBackend(t, "ref")
	s := newRecSink()
	c, err := DialNATS(testCtx(t), nc, "ref", NATSOptions{}, s)
	if err != nil {
		t.Fatal(err)
	}
	doHandshake(t, c, s)
	// The call's deadline comes before the hang guard's, so that the old Send fails by
	// its error.
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit/2)
	defer cancel()
	sent := make(chan error, 1)
	go func() {
		sent <- c.Send(ctx, []byte(msgLongCall))
	}()
	s.waitProgress(t)
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	wantClosed(t, sent, "the call in flight")
	if err := c.Send(testCtx(t), []byte(msgList)); !errors.Is(err, ErrClosed) {
		t.Fatalf("Send after Close: %v, want ErrClosed", err)
	}
}
