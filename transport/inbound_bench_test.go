package transport

import (
	"net"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/mcprouter/mcprouter/codec"
)

// benchHandler answers every request at once with an empty result, so that the
// benchmarks below measure the transport's inbound path and nothing else.
type benchHandler struct{}

func (benchHandler) AcceptSessionless(m *codec.Message, _ string) bool {
	return string(m.Method) == "initialize"
}

func (benchHandler) SessionClosed(*Session) {}

func (benchHandler) HandleMessage(x *Exchange) {
	if x.Msg.Kind != codec.KindRequest {
		x.Done()
		return
	}
	if string(x.Msg.Method) == "initialize" {
		x.Bind("2025-03-26", nil)
	}
	var buf [128]byte
	x.Reply(codec.AppendResult(buf[:0], x.Msg.ID, []byte(`{}`)))
}

// BenchmarkInboundStreamable drives HTTPServer.ServeStreamable directly (no sockets) with
// one POST per iteration on a 2025-03-26 session: a single request, and a batch of eight
// with one invalid element and one notification.
func BenchmarkInboundStreamable(b *testing.B) {
	h := benchHandler{}
	reg := NewRegistry(RegistryConfig{}, h)
	hs := NewHTTPServer(HTTPConfig{Rules: DefaultHTTPRules("127.0.0.1:0", testRevisions, "2025-03-26")}, reg, h)
	var ctx fasthttp.RequestCtx
	ctx.Init(&fasthttp.Request{}, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}, nil)
	post := func(sid, body string) {
		ctx.Response.Reset()
		r := &ctx.Request
		r.Reset()
		r.Header.SetMethod("POST")
		r.SetRequestURI("/mcp")
		r.Header.SetHost("127.0.0.1")
		r.Header.SetContentType("application/json")
		r.Header.Set("Accept", "application/json, text/event-stream")
		if sid != "" {
			r.Header.Set(HeaderSessionID, sid)
			r.Header.Set(HeaderProtocolVersion, "2025-03-26")
		}
		r.SetBodyString(body)
		hs.ServeStreamable(&ctx)
	}
	post("", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26"}}`)
	sid := string(ctx.Response.Header.Peek(HeaderSessionID))
	if sid == "" {
		b.Fatalf("initialize: %d %s", ctx.Response.StatusCode(), ctx.Response.Body())
	}
	batch := "[" + strings.Repeat(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"a":1}}},`, 6) +
		`{"jsonrpc":"2.0","id":8},{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}]`
	for _, c := range []struct{ name, body string }{
		{"single", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"a":1}}}`},
		{"batch8", batch},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(c.body)))
			for i := 0; i < b.N; i++ {
				post(sid, c.body)
				if ctx.Response.StatusCode() != fasthttp.StatusOK {
					b.Fatalf("status %d: %s", ctx.Response.StatusCode(), ctx.Response.Body())
				}
			}
		})
	}
}
