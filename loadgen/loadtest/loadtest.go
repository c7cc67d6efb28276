// Package loadtest is a minimal, fast MCP server over Streamable HTTP (fasthttp) with
// known, configurable behaviour. It serves two purposes:
//
//   - calibration: it answers every tools/call with one fixed result and costs almost
//     nothing, so running mcpload against it measures mcpload's own ceiling;
//   - verification: a fixed service time and a periodic stall (every n-th call takes
//     longer) make the latency distribution predictable, so tests can check that
//     mcpload's coordinated-omission correction shows exactly what it should.
//
// It implements just enough MCP for a load generator: initialize (issuing session ids),
// notifications (202), ping, tools/list with one "echo" tool, tools/call, and
// server/discover for the stateless revision. Other methods get -32601.
package loadtest

import (
	"context"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/loadgen/internal/wire"
	"github.com/mcprouter/mcprouter/transport/sse"
)

// Options configure the server's behaviour. The zero value answers at once.
type Options struct {
	// ServiceTime delays every tools/call reply.
	ServiceTime time.Duration
	// StallEvery makes every n-th tools/call (counted across the server in arrival
	// order, 1-based) take StallFor instead of ServiceTime. Zero disables stalls.
	StallEvery int
	StallFor   time.Duration
	// SSE frames request replies as text/event-stream instead of application/json.
	SSE bool
}

// Server is a running test server.
type Server struct {
	opts     Options
	ln       net.Listener
	srv      *fasthttp.Server
	calls    atomic.Int64 // tools/call received
	requests atomic.Int64 // every JSON-RPC request received
	sessions atomic.Int64
	done     chan error
}

// Start listens on addr (for example "127.0.0.1:0") and serves until Close.
func Start(addr string, o Options) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	s := &Server{opts: o, ln: ln, done: make(chan error, 1)}
	s.srv = &fasthttp.Server{
		Handler:                       s.Handler,
		Name:                          "mcpload-loadtest",
		NoDefaultDate:                 true,
		NoDefaultContentType:          true,
		DisableHeaderNamesNormalizing: false,
		ReadTimeout:                   time.Minute,
		IdleTimeout:                   time.Minute,
		MaxRequestBodySize:            4 << 20,
	}
	go func() { s.done <- s.srv.Serve(ln) }()
	return s, nil
}

// URL is the MCP endpoint.
func (s *Server) URL() string { return "http://" + s.ln.Addr().String() + "/mcp" }

// Calls is the number of tools/call requests received.
func (s *Server) Calls() int64 { return s.calls.Load() }

// Requests is the number of JSON-RPC requests received (all methods).
func (s *Server) Requests() int64 { return s.requests.Load() }

// Sessions is the number of sessions initialized.
func (s *Server) Sessions() int64 { return s.sessions.Load() }

// Close stops the server, waiting at most five seconds for open connections to finish.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := s.srv.ShutdownWithContext(ctx)
	// Shutdown does nothing if Serve has not started yet; closing the listener also
	// ends a Serve that starts late.
	s.ln.Close()
	select {
	case <-s.done:
	case <-ctx.Done():
	}
	return err
}

var (
	resultCall      = []byte(`{"content":[{"type":"text","text":"ok"}]}`)
	resultEmpty     = []byte(`{}`)
	resultToolsList = []byte(`{"tools":[{"name":"echo","description":"returns ok","inputSchema":{"type":"object","properties":{"text":{"type":"string"}}}}]}`)
	resultDiscover  = []byte(`{"supportedVersions":["2026-07-28"],"capabilities":{"tools":{}},"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"mcpload-loadtest","version":"1"}}}`)
)

// Handler serves one HTTP request. It is exported so that benchmarks can drive the
// server without a socket.
func (s *Server) Handler(ctx *fasthttp.RequestCtx) {
	switch string(ctx.Method()) {
	case fasthttp.MethodPost:
	case fasthttp.MethodDelete:
		ctx.SetStatusCode(fasthttp.StatusOK)
		return
	default:
		ctx.SetStatusCode(fasthttp.StatusMethodNotAllowed)
		return
	}
	var m codec.Message
	if err := codec.Scan(ctx.PostBody(), &m); err != nil {
		ctx.SetStatusCode(fasthttp.StatusBadRequest)
		ctx.SetContentType("application/json")
		ctx.SetBody(codec.AppendError(nil, nil, codec.CodeParseError, "parse error", nil))
		return
	}
	if m.Kind != codec.KindRequest {
		ctx.SetStatusCode(fasthttp.StatusAccepted) // notifications and responses
		return
	}
	s.requests.Add(1)
	var result []byte
	switch string(m.Method) {
	case "tools/call":
		n := s.calls.Add(1)
		d := s.opts.ServiceTime
		if s.opts.StallEvery > 0 && n%int64(s.opts.StallEvery) == 0 {
			d = s.opts.StallFor
		}
		if d > 0 {
			time.Sleep(d)
		}
		result = resultCall
	case "initialize":
		id := s.sessions.Add(1)
		ctx.Response.Header.Set("Mcp-Session-Id", "s-"+strconv.FormatInt(id, 10))
		result = initializeResult(wire.StringField(m.Params, "protocolVersion"))
	case "ping":
		result = resultEmpty
	case "tools/list":
		result = resultToolsList
	case "server/discover":
		result = resultDiscover
	default:
		s.reply(ctx, codec.AppendError(nil, m.ID, codec.CodeMethodNotFound, "method not found", nil))
		return
	}
	b := bufPool.Get().(*[]byte)
	*b = codec.AppendResult((*b)[:0], m.ID, result)
	s.reply(ctx, *b)
	bufPool.Put(b)
}

var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// reply sets msg (copied) as the body, framed as JSON or as one SSE event.
func (s *Server) reply(ctx *fasthttp.RequestCtx, msg []byte) {
	if !s.opts.SSE {
		ctx.SetContentType("application/json")
		ctx.SetBody(msg)
		return
	}
	b := bufPool.Get().(*[]byte)
	*b = sse.AppendEvent((*b)[:0], nil, "message", msg)
	ctx.SetContentType(sse.ContentType)
	ctx.SetBody(*b)
	bufPool.Put(b)
}

func initializeResult(requested string) []byte {
	v := "2025-11-25"
	switch requested {
	case "2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25":
		v = requested
	}
	b := []byte(`{"protocolVersion":`)
	b = codec.AppendString(b, v)
	return append(b, `,"capabilities":{"tools":{}},"serverInfo":{"name":"mcpload-loadtest","version":"1"}}`...)
}
