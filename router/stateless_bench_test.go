package router

import (
	"bufio"
	"bytes"
	"net"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/router/modern"
	"github.com/mcprouter/mcprouter/transport"
)

// replyFleet answers every request in Prepare with the result a backend gives a client of
// its era: what the router's own path costs, without sockets or a backend. It is a
// StatelessFleet, as the real fleet is, so that the router registers each stateless
// request's abandon hook, and pools its Session, as in front of the real one.
type replyFleet struct {
	echoFleet
	legacy, modern []byte
	code           int // when set, every request gets an error with this code instead
}

// replyBufs hold the replies replyFleet builds: a buffer on its stack would escape
// through Reply, an allocation per call that is the test fleet's, not the router's.
var replyBufs = sync.Pool{New: func() any { return new([512]byte) }}

func (f *replyFleet) Prepare(s *Session, x *transport.Exchange) bool {
	if x.Msg.Kind != codec.KindRequest {
		x.Done()
		return false
	}
	res := f.legacy
	if s.Stateless() {
		res = f.modern
	}
	buf := replyBufs.Get().(*[512]byte)
	defer replyBufs.Put(buf)
	if f.code != 0 {
		x.Reply(codec.AppendError(buf[:0], x.Msg.ID, f.code, "refused", nil))
		return false
	}
	x.Reply(codec.AppendResult(buf[:0], x.Msg.ID, res))
	return false
}

func (f *replyFleet) CancelRequest(*Session, []byte)           {}
func (f *replyFleet) ListCache([]byte) modern.Cache            { return modern.Cache{} }
func (f *replyFleet) Listen(_ *Session, x *transport.Exchange) { x.Done() }
func (f *replyFleet) EndListeners()                            {}
func (f *replyFleet) EndParked()                               {}

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
// behind it, as the app wires it: one POST per call, read from its bytes on the wire as
// the server reads it (headers parsed, the 2026-07-28 ones included).
type eraPoster struct {
	hs  *transport.HTTPServer
	ctx fasthttp.RequestCtx
	sid string
	rd  bytes.Reader
	br  *bufio.Reader
}

// newEraPoster serves f through a router, with statusOf as HTTPConfig.StatusOf (the
// app's is StatusOf).
func newEraPoster(tb testing.TB, f Fleet, statusOf func([]byte) int) *eraPoster {
	r := newTestRouter(tb, f)
	reg := transport.NewRegistry(transport.RegistryConfig{}, r)
	hs := transport.NewHTTPServer(transport.HTTPConfig{Rules: transport.DefaultHTTPRules("127.0.0.1:0", HeaderVersions, V20250326),
		StatusOf: statusOf}, reg, r)
	tb.Cleanup(func() {
		hs.Shutdown()
		reg.Close()
	})
	p := &eraPoster{hs: hs}
	p.br = bufio.NewReader(&p.rd)
	p.ctx.Init(&fasthttp.Request{}, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}, nil)
	p.post(p.wire(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"b","version":"1"}}}`, false))
	p.sid = string(p.ctx.Response.Header.Peek(transport.HeaderSessionID))
	if p.sid == "" {
		tb.Fatalf("initialize: %d %s", p.ctx.Response.StatusCode(), p.ctx.Response.Body())
	}
	p.post(p.wire(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, false))
	return p
}

// wire renders body as a 2025-11-25 session's POST, or (modern) as a 2026-07-28
// client's with the headers the revision asks for.
func (p *eraPoster) wire(body string, modern bool) []byte {
	if modern {
		return p.wireModern(body, "tools/call", "echo")
	}
	h := ""
	if p.sid != "" {
		h = transport.HeaderSessionID + ": " + p.sid + "\r\n" + transport.HeaderProtocolVersion + ": " + V20251125 + "\r\n"
	}
	return wirePost(h, body)
}

// wireModern renders body as a 2026-07-28 client's POST of method, with Mcp-Name when
// name is set.
func (p *eraPoster) wireModern(body, method, name string) []byte {
	h := transport.HeaderProtocolVersion + ": " + V20260728 + "\r\n" + transport.HeaderMethod + ": " + method + "\r\n"
	if name != "" {
		h += transport.HeaderName + ": " + name + "\r\n"
	}
	return wirePost(h, body)
}

// wirePost is a POST to /mcp with the headers every client sends, then headers (lines
// ending in CRLF), then body.
func wirePost(headers, body string) []byte {
	return []byte("POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n" +
		headers + "Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body)
}

// post serves one request from its wire bytes.
func (p *eraPoster) post(wire []byte) {
	ctx := &p.ctx
	ctx.Response.Reset()
	ctx.Request.Reset()
	p.rd.Reset(wire)
	p.br.Reset(&p.rd)
	if err := ctx.Request.Read(p.br); err != nil {
		panic(err)
	}
	p.hs.ServeStreamable(ctx)
}

// postDirect is post with the body set in place (Request.SetBodyRaw) rather than read
// into fasthttp's pooled body buffer, whose size follows what it read lately (a longer
// body than the last ones allocates until it recalibrates): for a test that counts what
// the transport and the router allocate.
func (p *eraPoster) postDirect(wire []byte) {
	at := bytes.Index(wire, []byte("\r\n\r\n")) + 4
	ctx := &p.ctx
	ctx.Response.Reset()
	ctx.Request.Reset()
	p.rd.Reset(wire[:at])
	p.br.Reset(&p.rd)
	if err := ctx.Request.Header.Read(p.br); err != nil {
		panic(err)
	}
	ctx.Request.SetBodyRaw(wire[at:])
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
	legacy, modern := p.wire(benchCallLegacy, false), p.wire(benchCallModern, true)
	check := func(what string) {
		if p.ctx.Response.StatusCode() != fasthttp.StatusOK {
			b.Fatalf("%s: status %d: %s", what, p.ctx.Response.StatusCode(), p.ctx.Response.Body())
		}
	}
	p.post(modern)
	check("modern")
	p.post(legacy)
	check("legacy")
	// A 2026-07-28 call that a 2025 backend answers (through the router's session with
	// it, as in front of a dual-era backend): its result lacks what the screen adds.
	pt := newEraPoster(b, &replyFleet{legacy: []byte(benchResLegacy), modern: []byte(benchResLegacy)}, StatusOf)
	for _, c := range []struct {
		name string
		p    *eraPoster
		wire []byte
	}{{"legacy", p, legacy}, {"modern", p, modern}, {"modern-translated", pt, modern}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(c.wire)))
			for i := 0; i < b.N; i++ {
				c.p.post(c.wire)
			}
			if st := c.p.ctx.Response.StatusCode(); st != fasthttp.StatusOK {
				b.Fatalf("%s: status %d: %s", c.name, st, c.p.ctx.Response.Body())
			}
		})
	}
	b.Run("interleaved", func(b *testing.B) {
		const round = 500
		var wM, wL, cM, cL time.Duration
		run := func(wire []byte, n int, wall, cpu *time.Duration) {
			c0, w0 := processCPU(b), time.Now()
			for i := 0; i < n; i++ {
				p.post(wire)
			}
			*wall += time.Since(w0)
			*cpu += processCPU(b) - c0
		}
		for done, i := 0, 0; done < b.N; i++ {
			n := min(round, b.N-done)
			if i%2 == 0 {
				run(modern, n, &wM, &cM)
				run(legacy, n, &wL, &cL)
			} else {
				run(legacy, n, &wL, &cL)
				run(modern, n, &wM, &cM)
			}
			done += n
		}
		per := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(b.N) }
		b.ReportMetric(per(cM), "modern-cpu-ns/call")
		b.ReportMetric(per(cL), "legacy-cpu-ns/call")
		b.ReportMetric(cM.Seconds()/cL.Seconds(), "modern/legacy-cpu")
		b.ReportMetric(wM.Seconds()/wL.Seconds(), "modern/legacy-wall")
	})
}

// processCPU is the CPU time the process has used (user and system, every thread: the
// garbage collector's work included), which a busy machine does not inflate as it does
// wall time.
func processCPU(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
