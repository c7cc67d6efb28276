package upstream

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/transport/auth"
	"github.com/mcprouter/mcprouter/transport/auth/authtest"
)

var benchResult = []byte(`{"content":[{"type":"text","text":"ok"}]}`)

// echoServer is an in-process fasthttp MCP endpoint that answers every request at once:
// with a JSON body, or with a one-event SSE body when the request's path is /sse;
// notifications get 202. It stands for the fastest possible backend, so that the
// benchmarks measure the client.
func echoServer(b *testing.B) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		var m codec.Message
		if codec.Scan(ctx.PostBody(), &m) != nil {
			ctx.SetStatusCode(fasthttp.StatusBadRequest)
			return
		}
		if m.Kind != codec.KindRequest {
			ctx.SetStatusCode(fasthttp.StatusAccepted)
			return
		}
		bp := getBuf()
		defer putBuf(bp)
		if bytes.Equal(ctx.Path(), []byte("/sse")) {
			ctx.SetContentType("text/event-stream")
			*bp = append(*bp, "event: message\ndata: "...)
			*bp = codec.AppendResult(*bp, m.ID, benchResult)
			*bp = append(*bp, "\n\n"...)
		} else {
			ctx.SetContentType("application/json")
			*bp = codec.AppendResult(*bp, m.ID, benchResult)
		}
		ctx.SetBody(*bp)
	}}
	go srv.Serve(ln) //nolint:errcheck // ends with Shutdown
	b.Cleanup(func() { _ = srv.Shutdown() })
	return "http://" + ln.Addr().String()
}

// countSink counts deliveries without copying.
type countSink struct{ n atomic.Int64 }

func (s *countSink) Message([]byte)     { s.n.Add(1) }
func (s *countSink) Event(Event, error) {}

var benchCall = []byte(`{"jsonrpc":"2.0","id":12345,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}`)

func BenchmarkHTTPRoundTrip(b *testing.B) {
	base := echoServer(b)
	for _, bc := range []struct {
		name, path string
		msg        []byte
		parallel   bool
		probe      bool
		pipeline   int
		bearer     bool // the router's own token as a Credential on every request
	}{
		{"json", "/mcp", benchCall, false, false, 0, false},
		{"sse", "/sse", benchCall, false, false, 0, false},
		{"notification-202", "/mcp", []byte(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":2}}`), false, false, 0, false},
		{"json-probe-every-request", "/mcp", benchCall, false, true, 0, false},
		{"json-parallel", "/mcp", benchCall, true, false, 0, false},
		{"sse-parallel", "/sse", benchCall, true, false, 0, false},
		{"json-pipelined", "/mcp", benchCall, false, false, 2, false},
		{"json-parallel-pipelined", "/mcp", benchCall, true, false, 2, false},
		{"json-bearer", "/mcp", benchCall, false, false, 0, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			if bc.probe {
				old := idleProbe
				idleProbe = 0
				defer func() { idleProbe = old }()
			}
			sink := &countSink{}
			opts := HTTPOptions{MaxConns: 16, Pipeline: bc.pipeline}
			if bc.bearer {
				cred, err := Bearer("eyJhbGciOiJSUzI1NiJ9.a-token-of-typical-length.signature")
				if err != nil {
					b.Fatal(err)
				}
				opts.Credentials = []Credential{cred}
			}
			c, err := DialHTTP(context.Background(), base+bc.path, opts, sink)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			ctx := context.Background()
			b.SetBytes(int64(len(bc.msg)))
			b.ReportAllocs()
			b.ResetTimer()
			if bc.parallel {
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if err := c.Send(ctx, bc.msg); err != nil {
							b.Error(err)
							return
						}
					}
				})
			} else {
				for i := 0; i < b.N; i++ {
					if err := c.Send(ctx, bc.msg); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.StopTimer()
			if bc.msg[len(bc.msg)-2] == '}' && bytes.Contains(bc.msg, []byte(`"id"`)) && sink.n.Load() < int64(b.N) {
				b.Fatalf("%d replies for %d requests", sink.n.Load(), b.N)
			}
		})
	}
}

// BenchmarkFasthttpBaseline is the same exchange with a bare fasthttp.HostClient and no
// MCP logic: the floor the client's overhead is measured against.
func BenchmarkFasthttpBaseline(b *testing.B) {
	base := echoServer(b)
	hc := &fasthttp.HostClient{Addr: strings.TrimPrefix(base, "http://"), MaxConns: 16}
	defer hc.CloseIdleConnections()
	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI(base + "/mcp")
	req.Header.SetMethod(fasthttp.MethodPost)
	req.Header.SetContentType("application/json")
	req.SetBodyRaw(benchCall)
	b.SetBytes(int64(len(benchCall)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := hc.Do(req, resp); err != nil {
			b.Fatal(err)
		}
		if len(resp.Body()) == 0 {
			b.Fatal("empty reply")
		}
	}
}

// signalSink wakes the benchmark at each delivered message.
type signalSink struct{ ch chan struct{} }

func (s *signalSink) Message([]byte)     { s.ch <- struct{}{} }
func (s *signalSink) Event(Event, error) {}

// BenchmarkStdioRoundTrip sends a tools/call to a child process (this test binary in
// echo mode) and waits for its reply, one at a time.
func BenchmarkStdioRoundTrip(b *testing.B) {
	sink := &signalSink{ch: make(chan struct{}, 1)}
	p, err := StartPool(childCommand("echo"), 1, StdioOptions{Logger: slog.New(slog.DiscardHandler)}, func(int) Sink { return sink })
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	c := p.Conn(0)
	ctx := context.Background()
	b.SetBytes(int64(len(benchCall)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := c.Send(ctx, benchCall); err != nil {
			b.Fatal(err)
		}
		<-sink.ch
	}
}

func BenchmarkSSEReader(b *testing.B) {
	var stream []byte
	for i := 0; i < 100; i++ {
		stream = append(stream, "id: 1-"...)
		stream = append(stream, byte('0'+i%10))
		stream = append(stream, "\nevent: message\ndata: "...)
		stream = codec.AppendResult(stream, []byte("7"), benchResult)
		stream = append(stream, "\n\n"...)
	}
	b.SetBytes(int64(len(stream)))
	b.ReportAllocs()
	r := bytes.NewReader(stream)
	for i := 0; i < b.N; i++ {
		r.Reset(stream)
		sr := newSSEReader(r, 1<<20)
		n := 0
		for {
			if _, err := sr.next(); err != nil {
				break
			}
			n++
		}
		sr.release()
		if n != 100 {
			b.Fatalf("%d events", n)
		}
	}
}

// BenchmarkCredentialValue is the cost a credential adds to each request: a static
// token, a token file (checked once a second), and a token from the authorization
// server once cached (client credentials; a principal's exchanged token).
func BenchmarkCredentialValue(b *testing.B) {
	path := filepath.Join(b.TempDir(), "token")
	if err := os.WriteFile(path, []byte("file-token"), 0o600); err != nil {
		b.Fatal(err)
	}
	p := authtest.Start(b, authtest.Options{})
	p.AddClient("router", "s3cret")
	static, _ := Bearer("static-token")
	file, _ := BearerFile(path)
	cc, _ := ClientCredentials(routerClient(p, "s3cret"))
	x, _ := NewTokenExchange(routerClient(p, "s3cret"), TokenExchangeOptions{})
	alice := &auth.Principal{Subject: "alice", Token: p.Token(authtest.Claims{Subject: "alice", Audience: []string{routerResource}})}
	for _, bc := range []struct {
		name string
		c    Credential
	}{{"static", static}, {"file", file}, {"client-credentials-cached", cc}, {"exchange-cached", x.For(alice)}} {
		b.Run(bc.name, func(b *testing.B) {
			ctx := context.Background()
			if _, err := bc.c.Value(ctx); err != nil { // fetch the token once
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := bc.c.Value(ctx); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkPostHeaders: a POST's request with its headers, kept by the conn from one
// POST to the next (acquirePost) against written anew each time (prepare and
// setPostHeaders on a pooled request, as every POST did before).
func BenchmarkPostHeaders(b *testing.B) {
	c, err := DialHTTP(context.Background(), "http://127.0.0.1:1/mcp", HTTPOptions{}, &countSink{})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	c.SetProtocolVersion("2025-06-18")
	sess := &session{id: "0f3c9a8e-5b7d-4e21-9c6a-2d8f1b4e7a90"}
	ctx := context.Background()
	b.Run("kept", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			pr, err := c.acquirePost(ctx, sess, true)
			if err != nil {
				b.Fatal(err)
			}
			pr.req.SetBodyRaw(benchCall)
			c.releasePost(pr)
		}
	})
	b.Run("anew", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			req := fasthttp.AcquireRequest()
			if err := c.prepare(ctx, req, fasthttp.MethodPost, sess, true); err != nil {
				b.Fatal(err)
			}
			setPostHeaders(&req.Header)
			req.SetBodyRaw(benchCall)
			fasthttp.ReleaseRequest(req)
		}
	})
}
