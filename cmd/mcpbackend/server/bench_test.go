package server

import (
	"encoding/json"
	"testing"

	"github.com/bytedance/sonic"

	"github.com/mcprouter/mcprouter/codec"
)

// nopResponder is the cheapest Responder: it keeps the last reply's length.
type nopResponder struct{ n int }

func (r *nopResponder) Reply(msg []byte)  { r.n = len(msg) }
func (r *nopResponder) Done()             {}
func (r *nopResponder) Send([]byte) error { return nil }

var echoRequest = []byte(`{"jsonrpc":"2.0","id":12345,"method":"tools/call","params":{"name":"echo","arguments":{"text":"the quick brown fox jumps over the lazy dog"},"_meta":{"progressToken":"p-1"}}}`)

// BenchmarkServeEcho measures the handler alone on the hot path: scan, peek, append the
// reply (what a transport does around it is measured in BenchmarkEchoHTTP).
func BenchmarkServeEcho(b *testing.B) {
	for _, v := range []string{"2025-03-26", "2025-06-18"} {
		b.Run(v, func(b *testing.B) {
			s := newTestServer(b, Config{})
			sess, _ := openSession(b, s, v, `{}`)
			var m codec.Message
			r := &nopResponder{}
			b.ReportAllocs()
			b.SetBytes(int64(len(echoRequest)))
			for b.Loop() {
				if err := codec.Scan(echoRequest, &m); err != nil {
					b.Fatal(err)
				}
				s.Serve(&m, sess, r)
			}
			if r.n == 0 {
				b.Fatal("no reply")
			}
		})
	}
}

// TestServeEchoNoAlloc guards the hot path: a tools/call of echo allocates nothing in
// the server once the buffer pool is warm.
func TestServeEchoNoAlloc(t *testing.T) {
	s := newTestServer(t, Config{})
	sess, _ := openSession(t, s, "2025-06-18", `{}`)
	var m codec.Message
	r := &nopResponder{}
	if err := codec.Scan(echoRequest, &m); err != nil {
		t.Fatal(err)
	}
	s.Serve(&m, sess, r) // warm the pool
	allocs := testing.AllocsPerRun(200, func() { s.Serve(&m, sess, r) })
	// sync.Pool may drop its contents at a GC; allow the rare refill.
	if allocs > 0.05 {
		t.Fatalf("%v allocations per echo call", allocs)
	}
}

// BenchmarkPeekArguments compares ways to get the echo text out of the params the codec
// scanned: the peek used on the hot path, sonic's lazy search, and a full decode.
func BenchmarkPeekArguments(b *testing.B) {
	var m codec.Message
	if err := codec.Scan(echoRequest, &m); err != nil {
		b.Fatal(err)
	}
	params := m.Params
	b.Run("peek", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(params)))
		for b.Loop() {
			if !isString(member(member(params, "arguments"), "text")) {
				b.Fatal("not found")
			}
		}
	})
	b.Run("sonic.Get", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(params)))
		for b.Loop() {
			n, err := sonic.Get(params, "arguments", "text")
			if err != nil {
				b.Fatal(err)
			}
			if raw, err := n.Raw(); err != nil || raw == "" {
				b.Fatal("not found")
			}
		}
	})
	b.Run("sonic.Unmarshal", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(params)))
		var p struct {
			Arguments struct {
				Text string `json:"text"`
			} `json:"arguments"`
		}
		for b.Loop() {
			if err := sonic.Unmarshal(params, &p); err != nil || p.Arguments.Text == "" {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding/json", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(params)))
		var p struct {
			Arguments struct {
				Text json.RawMessage `json:"text"`
			} `json:"arguments"`
		}
		for b.Loop() {
			if err := json.Unmarshal(params, &p); err != nil || len(p.Arguments.Text) == 0 {
				b.Fatal(err)
			}
		}
	})
}
