package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/mcprouter/mcprouter/internal/mcphttp"
	"github.com/mcprouter/mcprouter/router"
	"github.com/mcprouter/mcprouter/transport"
)

// Endpoint paths of the HTTP transports.
const (
	PathMCP     = "/mcp"     // Streamable HTTP
	PathSSE     = "/sse"     // legacy HTTP+SSE: the event stream
	PathMessage = "/message" // legacy HTTP+SSE: where messages are POSTed
)

// listener is the HTTP side of a started server.
type listener struct {
	ln     net.Listener
	srv    *fasthttp.Server
	served chan error
}

// httpRules are the Host/Origin/version checks: loopback names only unless
// Config.AllowedHosts / AllowedOrigins say otherwise. The listener is not known when New
// builds the HTTP server, so the default assumes a loopback one, which is what a
// reference backend normally is; the command derives the lists from its --listen.
func (s *Server) httpRules() transport.HTTPRules {
	rules := transport.DefaultHTTPRules("127.0.0.1:0", router.HeaderVersions, router.V20250326)
	if len(s.cfg.AllowedHosts) > 0 {
		rules.AllowedHosts = s.cfg.AllowedHosts
	}
	if len(s.cfg.AllowedOrigins) > 0 {
		rules.AllowedOrigins = s.cfg.AllowedOrigins
	}
	return rules
}

// Handler is the fasthttp handler of the three HTTP endpoints.
// With Config.Eras including 2026-07-28, POSTs that claim it are served statelessly
// (serveModernHTTP) and the rest by the 2025 endpoints, or refused when the server
// speaks 2026-07-28 only.
func (s *Server) Handler() fasthttp.RequestHandler {
	h := s.eraHandler()
	if s.cfg.Faults&FaultSlowBytes == 0 {
		return h
	}
	// fault_slow_bytes is answered in front of the transports, which write whole
	// messages (fault_wire.go).
	return func(ctx *fasthttp.RequestCtx) {
		if string(ctx.Path()) == PathMCP && s.serveSlowHTTP(ctx) {
			return
		}
		h(ctx)
	}
}

// eraHandler serves the endpoints in the generations Config.Eras names.
func (s *Server) eraHandler() fasthttp.RequestHandler {
	legacy := mcphttp.Handler(s.http, mcphttp.Paths{MCP: PathMCP, SSE: PathSSE, Message: PathMessage},
		"not found: the MCP endpoint is "+PathMCP+" (legacy SSE: "+PathSSE+")")
	if !s.cfg.Eras.modern() {
		return legacy
	}
	rules := s.httpRules()
	return func(ctx *fasthttp.RequestCtx) {
		if string(ctx.Path()) == PathMCP && s.serveModernHTTP(ctx, &rules) {
			return
		}
		if !s.cfg.Eras.legacy() {
			s.refuseLegacy(ctx)
			return
		}
		legacy(ctx)
	}
}

// Listen opens a TCP listener on addr ("127.0.0.1:0" picks a port) and serves the HTTP
// endpoints on it in the background until Close.
func (s *Server) Listen(addr string) error {
	if s.lis.ln != nil {
		return errors.New("mcpbackend: already listening")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", addr, err)
	}
	return s.ServeListener(ln)
}

// ServeListener serves the HTTP endpoints on ln in the background until Close (tests use
// it with in-memory listeners).
func (s *Server) ServeListener(ln net.Listener) error {
	if s.lis.ln != nil {
		return errors.New("mcpbackend: already listening")
	}
	s.lis.ln = ln
	s.lis.srv = &fasthttp.Server{
		Handler:              s.Handler(),
		Name:                 "mcpbackend",
		MaxRequestBodySize:   s.cfg.MaxBody,
		IdleTimeout:          2 * time.Minute,
		ReadTimeout:          2 * time.Minute,
		CloseOnShutdown:      true,
		NoDefaultContentType: true,
		Logger:               fasthttpLogger{s},
	}
	s.lis.served = make(chan error, 1)
	go func() { s.lis.served <- s.lis.srv.Serve(ln) }()
	return nil
}

// Addr is the HTTP listener's address, "" before Listen.
func (s *Server) Addr() string {
	if s.lis.ln == nil {
		return ""
	}
	return s.lis.ln.Addr().String()
}

// URL is the Streamable HTTP endpoint's URL; SSEURL the legacy one's.
func (s *Server) URL() string    { return "http://" + s.Addr() + PathMCP }
func (s *Server) SSEURL() string { return "http://" + s.Addr() + PathSSE }

// ServeStdio serves one client on r (its stdin) and w (its stdout) until r ends or ctx
// is done.
func (s *Server) ServeStdio(ctx context.Context, r io.Reader, w io.Writer) error {
	if s.cfg.Faults&FaultSlowBytes != 0 && s.wire == nil {
		s.wire = &stdioWire{w: w} // fault_slow_bytes trickles its lines on it
		w = s.wire
	}
	return transport.ServeStdio(ctx, transport.StdioConfig{MaxMessage: s.cfg.MaxBody}, s.reg, s, r, w)
}

// Close stops the timer, ends every session (streams get a retry hint, in-flight calls
// end without reply), and stops the HTTP server, waiting for it until ctx ends.
func (s *Server) Close(ctx context.Context) error {
	var err error
	s.closeOnce.Do(func() {
		s.closeListeners()
		close(s.stop)
		s.wg.Wait()
		s.http.Shutdown()
		s.reg.Close()
		if s.lis.srv != nil {
			err = s.lis.srv.ShutdownWithContext(ctx)
			select {
			case <-s.lis.served:
			case <-ctx.Done():
				if err == nil {
					err = ctx.Err()
				}
			}
		}
	})
	return err
}

// fasthttpLogger sends fasthttp's complaints to the server's logger.
type fasthttpLogger struct{ s *Server }

func (l fasthttpLogger) Printf(format string, args ...any) {
	l.s.log.Warn("fasthttp", "msg", fmt.Sprintf(format, args...))
}
