// Package memhttp runs a fasthttp server on an in-memory listener for tests, with a
// net/http client that reaches it: the harness of the transport and router tests, which
// need real HTTP without a socket. Only tests import it.
package memhttp

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttputil"

	"github.com/mcprouter/mcprouter/internal/ctxtime"
)

// Server is srv serving on an in-memory listener.
type Server struct {
	// Listener is where srv serves; its Dial and DialWithLocalAddr open raw
	// connections to it.
	Listener *fasthttputil.InmemoryListener
	// Client sends every request to srv, whatever the URL's host.
	Client *http.Client

	srv  *fasthttp.Server
	done chan struct{} // closed when Serve returned
}

// Start serves srv until the test ends. At cleanup srv is shut down, given up to wait
// to finish, and the test fails if Serve has not returned by then; cleanups the
// caller registers after Start run before it (the handler's own shutdown first).
func Start(tb testing.TB, srv *fasthttp.Server, wait time.Duration) *Server {
	s := &Server{Listener: fasthttputil.NewInmemoryListener(), srv: srv, done: make(chan struct{})}
	go func() {
		srv.Serve(s.Listener)
		close(s.done)
	}()
	s.Client = &http.Client{Transport: &http.Transport{
		DialContext:         func(context.Context, string, string) (net.Conn, error) { return s.Listener.Dial() },
		MaxIdleConnsPerHost: 16,
	}}
	tb.Cleanup(func() { s.stop(tb, wait) })
	return s
}

func (s *Server) stop(tb testing.TB, wait time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	s.srv.ShutdownWithContext(ctx)
	s.Listener.Close()
	if !ctxtime.Wait(s.done, wait) {
		tb.Error("the in-memory server did not stop")
	}
	s.Client.CloseIdleConnections()
}
