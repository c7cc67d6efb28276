package modern

import (
	"bytes"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/codec"
)

// BenchmarkCheck is the per-request cost a 2026-07-28 request adds: read _meta, judge
// headers, version, method and a capability.
func BenchmarkCheck(b *testing.B) {
	m, msg := scan(b, call("echo"))
	h := headers("tools/call", "echo")
	var meta Meta
	b.ReportAllocs()
	b.SetBytes(int64(len(msg)))
	for b.Loop() {
		ReadMeta(m.Params, &meta)
		if r := checker.Check(m, &meta, h); !r.OK() {
			b.Fatal(r.Message)
		}
		_ = Require(&meta, CapSampling)
	}
}

// BenchmarkCheckOnly is Check alone, the _meta read beforehand (the router reads a
// client's _meta once and keeps it: metaMemos): the headers against the body, the
// version and the method.
func BenchmarkCheckOnly(b *testing.B) {
	m, _ := scan(b, call("echo"))
	h := headers("tools/call", "echo")
	var meta Meta
	ReadMeta(m.Params, &meta)
	b.ReportAllocs()
	for b.Loop() {
		if r := checker.Check(m, &meta, h); !r.OK() {
			b.Fatal(r.Message)
		}
	}
}

// BenchmarkDecorate: resultType and serverInfo added to a tools/call result.
func BenchmarkDecorate(b *testing.B) {
	result := []byte(`{"content":[{"type":"text","text":"hello, world"}],"isError":false}`)
	d := Decoration{ServerInfo: serverInfo}
	out := make([]byte, 0, 512)
	b.ReportAllocs()
	b.SetBytes(int64(len(result)))
	for b.Loop() {
		out = AppendDecorated(out[:0], result, &d)
	}
}

// BenchmarkEncodedEquals: a Base64 Mcp-Name compared with the body's name.
func BenchmarkEncodedEquals(b *testing.B) {
	h := []byte("=?base64?SGVsbG8sIOS4lueVjA==?=")
	want := []byte("Hello, 世界")
	b.ReportAllocs()
	for b.Loop() {
		if ok, _ := EncodedEquals(h, want); !ok {
			b.Fatal("mismatch")
		}
	}
}

// BenchmarkSealOpen: one requestState issued and verified (the input_required path,
// not per request).
func BenchmarkSealOpen(b *testing.B) {
	s, _ := testSealer(b)
	m, _ := scan(b, call("sample"))
	payload := []byte("instance-3/upstream-request-42")
	b.ReportAllocs()
	for b.Loop() {
		req := RequestDigest(m)
		st := s.Seal(payload, "alice", req, time.Minute)
		if _, err := s.Open([]byte(st), "alice", req); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReply: a tools/call response read and its result decorated, as the router's
// screen does it (ReadReply, one walk), against a scan of the response and then
// AppendDecorated's own walk of the result.
func BenchmarkReply(b *testing.B) {
	msg := []byte(`{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"hello"}],"structuredContent":{"text":"hello"}}}`)
	d := Decoration{ServerInfo: serverInfo, ReplaceInfo: true}
	out := make([]byte, 0, 512)
	b.Run("read", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(msg)))
		for b.Loop() {
			var r Reply
			ReadReply(msg, &r)
			out = r.AppendDecorated(out[:0], msg, &d)
		}
	})
	b.Run("plain", func(b *testing.B) { // what the screen does first (AppendPlainDecorated)
		b.ReportAllocs()
		b.SetBytes(int64(len(msg)))
		for b.Loop() {
			var ok bool
			if out, ok = AppendPlainDecorated(out[:0], msg, []byte("7"), &d); !ok {
				b.Fatal("not decorated")
			}
		}
	})
	b.Run("scan", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(msg)))
		for b.Loop() {
			var m codec.Message
			if codec.Scan(msg, &m) != nil {
				b.Fatal("scan")
			}
			at := cap(msg) - cap(m.Result)
			out = append(out[:0], msg[:at]...)
			out = AppendDecorated(out, m.Result, &d)
			out = append(out, msg[at+len(m.Result):]...)
		}
	})
}

// BenchmarkObjectEnd: the end of a 2026-07-28 backend's serverInfo, which the screen
// replaces (AppendPlainDecorated): strings passed by a search for their closing quote
// (after) against a walk of every byte (before, objectEndBytewise).
func BenchmarkObjectEnd(b *testing.B) {
	info := []byte(`{"name":"mcpbackend","title":"MCP reference backend","version":"1.4.2"}},"content":[]}`)
	want := bytes.IndexByte(info, '}') + 1
	for _, c := range []struct {
		name string
		end  func([]byte, int) int
	}{{"before", objectEndBytewise}, {"after", objectEnd}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if c.end(info, 0) != want {
					b.Fatal("wrong end")
				}
			}
		})
	}
}

// objectEndBytewise is objectEnd as it was, a walk of every byte: the reference of
// BenchmarkObjectEnd and TestObjectEnd.
func objectEndBytewise(b []byte, at int) int {
	if at >= len(b) || b[at] != '{' {
		return -1
	}
	depth, str := 0, false
	for i := at; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			str = !str
		case str:
		case c == '{' || c == '[':
			depth++
		case c == '}' || c == ']':
			if depth--; depth == 0 {
				return i + 1
			}
		}
	}
	return -1
}
