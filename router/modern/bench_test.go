package modern

import (
	"testing"
	"time"
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
