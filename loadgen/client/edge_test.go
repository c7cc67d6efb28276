package client

import (
	"bufio"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// edgeServer answers initialize normally and every other request with reply.
func edgeServer(t *testing.T, reply func(ctx *fasthttp.RequestCtx)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		body := string(ctx.PostBody())
		switch {
		case strings.Contains(body, `"initialize"`):
			ctx.Response.Header.Set("Mcp-Session-Id", "s1")
			ctx.SetContentType("application/json")
			ctx.SetBodyString(`{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"edge","version":"1"}}}`)
		case !strings.Contains(body, `"id"`) || ctx.IsDelete():
			ctx.SetStatusCode(fasthttp.StatusAccepted)
		default:
			reply(ctx)
		}
	}}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Shutdown() })
	return "http://" + ln.Addr().String() + "/mcp"
}

// hold stalls a handler until done closes (the server shuts down at the end of the
// test), a minute at most.
func hold(done <-chan struct{}) {
	select {
	case <-done:
	case <-time.After(time.Minute):
	}
}

func TestHTTPEdgeCases(t *testing.T) {
	tests := []struct {
		name   string
		reply  func(ctx *fasthttp.RequestCtx)
		class  Class
		code   int
		status int
	}{
		{"plain 503", func(ctx *fasthttp.RequestCtx) { ctx.SetStatusCode(503) }, ClassHTTP, 503, 503},
		{"JSON-RPC error with 500", func(ctx *fasthttp.RequestCtx) {
			ctx.SetStatusCode(500)
			ctx.SetBodyString(`{"jsonrpc":"2.0","id":2,"error":{"code":-32603,"message":"boom"}}`)
		}, ClassJSONRPC, -32603, 500},
		{"JSON-RPC error with 200", func(ctx *fasthttp.RequestCtx) {
			ctx.SetContentType("application/json")
			ctx.SetBodyString(`{"jsonrpc":"2.0","id":2,"error":{"code":-32001,"message":"busy"}}`)
		}, ClassJSONRPC, -32001, 0},
		{"session gone", func(ctx *fasthttp.RequestCtx) { ctx.SetStatusCode(404) }, ClassHTTP, 404, 404},
		{"202 to a request", func(ctx *fasthttp.RequestCtx) { ctx.SetStatusCode(202) }, ClassProtocol, 0, 0},
		{"not JSON", func(ctx *fasthttp.RequestCtx) { ctx.SetBodyString("<html>") }, ClassProtocol, 0, 0},
		{"wrong id", func(ctx *fasthttp.RequestCtx) {
			ctx.SetBodyString(`{"jsonrpc":"2.0","id":99,"result":{}}`)
		}, ClassProtocol, 0, 0},
		{"too large", func(ctx *fasthttp.RequestCtx) {
			ctx.SetBodyString(`{"jsonrpc":"2.0","id":2,"result":{"x":"` + strings.Repeat("x", 2<<20) + `"}}`)
		}, ClassProtocol, 0, 0},
		{"SSE event too large", func(ctx *fasthttp.RequestCtx) {
			ctx.SetContentType("text/event-stream")
			ctx.SetBodyString("data: " + strings.Repeat("x", 2<<20) + "\n\n")
		}, ClassProtocol, 0, 0},
		{"stall", func(ctx *fasthttp.RequestCtx) { hold(ctx.Done()) }, ClassTimeout, 0, 0},
		{"SSE ends without the reply", func(ctx *fasthttp.RequestCtx) {
			ctx.SetContentType("text/event-stream")
			ctx.SetBodyString("data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{}}\n\n")
		}, ClassProtocol, 0, 0},
		{"SSE hangs after a notification", func(ctx *fasthttp.RequestCtx) {
			ctx.SetContentType("text/event-stream")
			ctx.SetBodyStreamWriter(func(w *bufio.Writer) {
				w.WriteString("data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{}}\n\n")
				w.Flush()
				// Until the client hangs up: a write to a closed connection fails.
				for range 600 {
					time.Sleep(100 * time.Millisecond)
					if w.WriteString(":\n\n"); w.Flush() != nil {
						return
					}
				}
			})
		}, ClassTimeout, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := dialTest(t, Options{URL: edgeServer(t, tt.reply), MaxMessage: 1 << 20}, 0)
			var rep Reply
			// The stalling servers never answer while the test runs, so a timeout class
			// shows that the call ended on its deadline: had it waited for the server, it
			// would still be waiting, or (after a minute) see an empty reply.
			// The other cases have a deadline no machine load reaches, so that their
			// class cannot turn into a timeout.
			deadline := time.Now().Add(time.Minute)
			if tt.class == ClassTimeout {
				deadline = time.Now().Add(300 * time.Millisecond)
			}
			err := s.Call(&Request{Method: "tools/call", Params: []byte(`{"name":"x"}`)}, deadline, &rep)
			var e *Error
			if !errors.As(err, &e) || e.Class != tt.class || e.Code != tt.code || e.Status != tt.status {
				t.Fatalf("err = %#v, want class %v code %d status %d", err, tt.class, tt.code, tt.status)
			}
			if tt.name == "session gone" && !errors.Is(err, ErrSessionExpired) {
				t.Errorf("404 on a session is not ErrSessionExpired")
			}
		})
	}
}
