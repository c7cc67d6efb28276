package router

import (
	"net"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/transport"
)

// replyFleet answers every request in Prepare with the result a backend gives a client of
// its era: what the router's own path costs, without sockets or a backend.
type replyFleet struct {
	echoFleet
	legacy, modern []byte
	code           int // when set, every request gets an error with this code instead
}

func (f *replyFleet) Prepare(s *Session, x *transport.Exchange) bool {
	if x.Msg.Kind != codec.KindRequest {
		x.Done()
		return false
	}
	res := f.legacy
	if s.Stateless() {
		res = f.modern
	}
	var buf [512]byte
	if f.code != 0 {
		x.Reply(codec.AppendError(buf[:0], x.Msg.ID, f.code, "refused", nil))
		return false
	}
	x.Reply(codec.AppendResult(buf[:0], x.Msg.ID, res))
	return false
}

// The two calls of BenchmarkInboundEras: the same tools/call as a 2025-11-25 session
// sends it and as a 2026-07-28 client does, and what a 2026-07-28 backend answers each
// through the fleet (a 2025 session gets the result without resultType and _meta).
const (
	benchCallLegacy = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}`
	benchCallModern = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"},` + testMeta + `}}}`
	benchResLegacy  = `{"content":[{"type":"text","text":"hello"}],"structuredContent":{"text":"hello"}}`
	benchResModern  = `{"resultType":"complete","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"mcpbackend","version":"dev"}},"content":[{"type":"text","text":"hello"}],"structuredContent":{"text":"hello"}}`
)

// eraPoster drives HTTPServer.ServeStreamable directly (no sockets) with the router
// behind it, as the app wires it: one POST per call.
type eraPoster struct {
	hs  *transport.HTTPServer
	ctx fasthttp.RequestCtx
	sid string
}

// newEraPoster serves f through a router, with statusOf as HTTPConfig.StatusOf (the
// app's is StatusOf).
func newEraPoster(tb testing.TB, f *replyFleet, statusOf func([]byte) int) *eraPoster {
	r := newTestRouter(tb, f)
	reg := transport.NewRegistry(transport.RegistryConfig{}, r)
	hs := transport.NewHTTPServer(transport.HTTPConfig{Rules: transport.DefaultHTTPRules("127.0.0.1:0", HeaderVersions, V20250326),
		StatusOf: statusOf}, reg, r)
	tb.Cleanup(func() {
		hs.Shutdown()
		reg.Close()
	})
	p := &eraPoster{hs: hs}
	p.ctx.Init(&fasthttp.Request{}, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}, nil)
	p.post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"b","version":"1"}}}`, false)
	p.sid = string(p.ctx.Response.Header.Peek(transport.HeaderSessionID))
	if p.sid == "" {
		tb.Fatalf("initialize: %d %s", p.ctx.Response.StatusCode(), p.ctx.Response.Body())
	}
	p.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, false)
	return p
}

// post sends body as a 2025-11-25 session's POST, or (modern) as a 2026-07-28 client's
// with the headers the revision asks for.
func (p *eraPoster) post(body string, modern bool) {
	ctx := &p.ctx
	ctx.Response.Reset()
	r := &ctx.Request
	r.Reset()
	r.Header.SetMethod("POST")
	r.SetRequestURI("/mcp")
	r.Header.SetHost("127.0.0.1")
	r.Header.SetContentType("application/json")
	r.Header.Set("Accept", "application/json, text/event-stream")
	if modern {
		r.Header.Set(transport.HeaderProtocolVersion, V20260728)
		r.Header.Set(transport.HeaderMethod, "tools/call")
		r.Header.Set(transport.HeaderName, "echo")
	} else if p.sid != "" {
		r.Header.Set(transport.HeaderSessionID, p.sid)
		r.Header.Set(transport.HeaderProtocolVersion, V20251125)
	}
	r.SetBodyString(body)
	p.hs.ServeStreamable(ctx)
}

// BenchmarkInboundEras measures what the router and its transport spend on one
// tools/call of each era, the fleet answering at once: a 2026-07-28 stateless call
// against a 2025-11-25 session's, in one process, alternating rounds so that both see
// the same machine. The sub-benchmarks time each path alone (for -cpuprofile and
// allocations); "interleaved" reports both and their ratio (modern/legacy: above 1
// means the stateless path costs more).
//
//	go test -run '^$' -bench BenchmarkInboundEras -benchtime 200000x ./router/
func BenchmarkInboundEras(b *testing.B) {
	p := newEraPoster(b, &replyFleet{legacy: []byte(benchResLegacy), modern: []byte(benchResModern)}, StatusOf)
	check := func(modern bool) {
		if p.ctx.Response.StatusCode() != fasthttp.StatusOK {
			b.Fatalf("modern %v: status %d: %s", modern, p.ctx.Response.StatusCode(), p.ctx.Response.Body())
		}
	}
	p.post(benchCallModern, true)
	check(true)
	p.post(benchCallLegacy, false)
	check(false)
	for _, c := range []struct {
		name   string
		body   string
		modern bool
	}{{"legacy", benchCallLegacy, false}, {"modern", benchCallModern, true}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(c.body)))
			for i := 0; i < b.N; i++ {
				p.post(c.body, c.modern)
			}
			check(c.modern)
		})
	}
	b.Run("interleaved", func(b *testing.B) {
		const round = 500
		var tM, tL time.Duration
		round1 := func(body string, modern bool, n int) time.Duration {
			start := time.Now()
			for i := 0; i < n; i++ {
				p.post(body, modern)
			}
			return time.Since(start)
		}
		for done, i := 0, 0; done < b.N; i++ {
			n := min(round, b.N-done)
			if i%2 == 0 {
				tM += round1(benchCallModern, true, n)
				tL += round1(benchCallLegacy, false, n)
			} else {
				tL += round1(benchCallLegacy, false, n)
				tM += round1(benchCallModern, true, n)
			}
			done += n
		}
		b.ReportMetric(float64(tM.Nanoseconds())/float64(b.N), "modern-ns/call")
		b.ReportMetric(float64(tL.Nanoseconds())/float64(b.N), "legacy-ns/call")
		b.ReportMetric(tM.Seconds()/tL.Seconds(), "modern/legacy")
	})
}
