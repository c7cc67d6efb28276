package client

import (
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/loadgen/loadtest"
)

// BenchmarkHTTPCall measures one tools/call round trip over loopback against the
// trivial loadtest server (both sides in this process): the client's cost per call
// plus the server's.
func BenchmarkHTTPCall(b *testing.B) {
	for _, sse := range []bool{false, true} {
		name := "json"
		if sse {
			name = "sse"
		}
		b.Run(name, func(b *testing.B) {
			srv, err := loadtest.Start("127.0.0.1:0", loadtest.Options{SSE: sse})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { srv.Close() }) // registered first, so it runs after the session has closed
			s := dialTest(b, Options{URL: srv.URL()}, 0)
			req := Request{Method: "tools/call", Name: []byte("echo"), Params: []byte(`{"name":"echo","arguments":{"text":"hi"}}`)}
			var rep Reply
			b.ReportAllocs()
			b.SetBytes(int64(len(req.Params)))
			for b.Loop() {
				if err := s.Call(&req, time.Now().Add(5*time.Second), &rep); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
