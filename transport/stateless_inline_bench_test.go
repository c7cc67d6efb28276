package transport

import (
	"net"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// BenchmarkWatchOnCaller: what a stateless request worked on its post's goroutine pays
// for the watch of its connection when it is answered before StatelessStreamAfter (every
// request of a fast backend): WatchOnCaller, then the post's stop once the handler
// returned. Run it with -benchmem and -cpu 1,2 (the arms of many posts at once).
func BenchmarkWatchOnCaller(b *testing.B) {
	s := NewHTTPServer(HTTPConfig{Rules: DefaultHTTPRules("127.0.0.1:0", testRevisions, "2025-03-26"),
		StatelessStreamAfter: time.Second}, NewRegistry(RegistryConfig{}, nil), nil)
	if s.watcher == nil {
		b.Skip("no close watcher here")
	}
	conn := loopbackConn(b)
	b.RunParallel(func(pb *testing.PB) {
		var ctx fasthttp.RequestCtx
		ctx.Init2(conn, nil, false)
		p, x := callerPost(s)
		for pb.Next() {
			p.inl.ctx = &ctx
			if !x.WatchOnCaller() {
				b.Error("WatchOnCaller refused a loopback connection")
				return
			}
			p.inl.stop()
		}
	})
}

// loopbackConn is the client side of a loopback TCP connection (one with a descriptor,
// which the close watcher takes), open until the test ends.
func loopbackConn(tb testing.TB) net.Conn {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { conn.Close() })
	peer, err := ln.Accept()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { peer.Close() })
	return conn
}

// callerPost is a stateless post of s whose client takes streams, its call begun, and
// the exchange of its message: as postStateless hands it to a handler.
func callerPost(s *HTTPServer) (*httpPost, *Exchange) {
	p := getPost()
	p.srv, p.stateless, p.accept = s, true, acceptSSE
	p.call.init(p, false)
	x := &Exchange{}
	x.call = p.call
	return p, x
}
