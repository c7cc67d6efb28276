package codec

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/bytedance/sonic"
	gojson "github.com/goccy/go-json"
	"github.com/valyala/fastjson"

	"github.com/mcprouter/mcprouter/internal/golden"
	"github.com/mcprouter/mcprouter/internal/testio"
)

// benchMessages are the inputs of BenchmarkEnvelope, in testdata/bench.
var benchMessages = []string{"call199", "result2k6", "read64k", "batch100"}

func loadBench(tb testing.TB, name string) []byte {
	tb.Helper()
	return golden.Read(tb, filepath.Join("testdata", "bench", name+".json"))
}

// envelope is what the competitors decode into: the same things Scan extracts (kind is
// derived from which members are set).
type envelope struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
	Result  json.RawMessage `json:"result"`
	Error   json.RawMessage `json:"error"`
}

func (e *envelope) kind() Kind {
	switch {
	case e.Method != "" && e.ID != nil:
		return KindRequest
	case e.Method != "":
		return KindNotification
	case e.Result != nil:
		return KindResult
	case e.Error != nil:
		return KindError
	}
	return KindInvalid
}

// sink keeps the extracted values alive so that nothing is optimised away.
var sink struct {
	kind Kind
	n    int
}

func keep(k Kind, id, method, body []byte) {
	sink.kind = k
	sink.n += len(id) + len(method) + len(body)
}

// What each competitor validates (checked with deliberately broken inputs):
//   - codec: everything: RFC 8259 syntax, escapes, numbers, control characters, UTF-8,
//     nesting depth, and the JSON-RPC envelope rules.
//   - encoding_json: json.Unmarshal checks the whole input's syntax (escapes, numbers,
//     control characters, trailing data) before decoding; it does not reject invalid
//     UTF-8 (it replaces it with U+FFFD in decoded strings, keeps it in RawMessage).
//   - sonic: Unmarshal with ValidateString (the strictest setting) checks syntax,
//     including the RawMessage members it skips over and control characters; it
//     accepted invalid UTF-8 in every probe.
//   - gojson: Unmarshal checks syntax like encoding/json; no UTF-8 validation.
//   - fastjson: ParseBytes alone misses bad escapes, leading zeros and raw control
//     characters, so the benchmark runs ValidateBytes first (full syntax; no UTF-8
//     validation), then ParseBytes and Get on a reused Parser. Its "raw" params and
//     result are *fastjson.Value trees, not byte spans: the best it offers.
var sonicAPI = sonic.Config{ValidateString: true}.Froze()

func BenchmarkEnvelope(b *testing.B) {
	type lib struct {
		name string
		one  func(b *testing.B, msg []byte)
	}
	libs := []lib{
		{"codec", benchCodec},
		{"encoding_json", func(b *testing.B, msg []byte) { benchUnmarshal(b, msg, json.Unmarshal) }},
		{"sonic", func(b *testing.B, msg []byte) { benchUnmarshal(b, msg, sonicAPI.Unmarshal) }},
		{"gojson", func(b *testing.B, msg []byte) { benchUnmarshal(b, msg, gojson.Unmarshal) }},
		{"fastjson", benchFastjson},
	}
	for _, l := range libs {
		for _, name := range benchMessages {
			msg := loadBench(b, name)
			measure(b, l.name+"/"+name, len(msg), func(b *testing.B) {
				l.one(b, msg)
			})
		}
	}
}

// reportCPU pins the benchmark goroutine to its thread and, when the returned function
// runs, reports the thread's CPU time per op as "cpu-ns/op". On a shared machine it is
// steadier than wall time. It does not count work done on other threads (the
// background part of the garbage collector), which favours the allocating libraries:
// ratios against the codec in cpu-ns/op are conservative.
func reportCPU(b *testing.B) func() {
	runtime.LockOSThread()
	c0, ok := threadCPUTime()
	return func() {
		if c1, ok1 := threadCPUTime(); ok && ok1 && b.N > 0 {
			b.ReportMetric(float64(c1-c0)/float64(b.N), "cpu-ns/op")
		}
		runtime.UnlockOSThread()
	}
}

// measure runs f as the sub-benchmark name with the figures every codec benchmark
// reports: allocations, CPU time per op and, when n > 0, n bytes per op. f runs the
// loop itself, so that the loop's body is not behind a call.
func measure(b *testing.B, name string, n int, f func(b *testing.B)) {
	b.Run(name, func(b *testing.B) {
		if n > 0 {
			b.SetBytes(int64(n))
		}
		b.ReportAllocs()
		defer reportCPU(b)()
		f(b)
	})
}

func benchCodec(b *testing.B, msg []byte) {
	var m Message
	if IsBatch(msg) {
		elems := make([][]byte, 0, 128)
		for b.Loop() {
			var err error
			elems, err = SplitBatch(msg, elems[:0])
			if err != nil {
				b.Fatal(err)
			}
			for _, e := range elems {
				if err := Scan(e, &m); err != nil {
					b.Fatal(err)
				}
				keep(m.Kind, m.ID, m.Method, m.Params)
			}
		}
		return
	}
	for b.Loop() {
		if err := Scan(msg, &m); err != nil {
			b.Fatal(err)
		}
		keep(m.Kind, m.ID, m.Method, m.Params)
		keep(m.Kind, nil, nil, m.Result)
	}
}

func benchUnmarshal(b *testing.B, msg []byte, unmarshal func([]byte, any) error) {
	if IsBatch(msg) {
		var batch []envelope
		for b.Loop() {
			batch = batch[:0]
			if err := unmarshal(msg, &batch); err != nil {
				b.Fatal(err)
			}
			for i := range batch {
				e := &batch[i]
				keep(e.kind(), e.ID, []byte(nil), e.Params)
				sink.n += len(e.Method)
			}
		}
		return
	}
	for b.Loop() {
		var e envelope
		if err := unmarshal(msg, &e); err != nil {
			b.Fatal(err)
		}
		keep(e.kind(), e.ID, nil, e.Params)
		keep(e.kind(), nil, nil, e.Result)
		sink.n += len(e.Method)
	}
}

func benchFastjson(b *testing.B, msg []byte) {
	var p fastjson.Parser
	one := func(v *fastjson.Value) {
		id := v.Get("id")
		method := v.GetStringBytes("method")
		params := v.Get("params")
		result := v.Get("result")
		k := KindInvalid
		switch {
		case method != nil && id != nil:
			k = KindRequest
		case method != nil:
			k = KindNotification
		case result != nil:
			k = KindResult
		case v.Get("error") != nil:
			k = KindError
		}
		sink.kind = k
		sink.n += len(method)
		if id != nil {
			sink.n++
		}
		if params != nil || result != nil {
			sink.n++
		}
	}
	for b.Loop() {
		if err := fastjson.ValidateBytes(msg); err != nil {
			b.Fatal(err)
		}
		v, err := p.ParseBytes(msg)
		if err != nil {
			b.Fatal(err)
		}
		if v.Type() == fastjson.TypeArray {
			arr, _ := v.Array()
			for _, e := range arr {
				one(e)
			}
			continue
		}
		one(v)
	}
}

// BenchmarkSplitBatch measures batch splitting alone (full validation of the array).
func BenchmarkSplitBatch(b *testing.B) {
	msg := loadBench(b, "batch100")
	elems := make([][]byte, 0, 128)
	b.SetBytes(int64(len(msg)))
	b.ReportAllocs()
	defer reportCPU(b)()
	for b.Loop() {
		elems, _ = SplitBatch(msg, elems[:0])
	}
}

// BenchmarkRewrite measures the forwarding rewrites on the 199-byte tools/call.
func BenchmarkRewrite(b *testing.B) {
	msg := loadBench(b, "call199")
	var m Message
	if err := Scan(msg, &m); err != nil {
		b.Fatal(err)
	}
	dst := make([]byte, 0, 512)
	measure(b, "ReplaceID", len(msg), func(b *testing.B) {
		for b.Loop() {
			dst = AppendReplaceID(dst[:0], msg, &m, []byte(`"r7:12345"`))
		}
	})
	measure(b, "ReplaceProgressToken", len(msg), func(b *testing.B) {
		for b.Loop() {
			dst = AppendReplaceProgressToken(dst[:0], msg, &m, []byte(`987654`))
		}
	})
	measure(b, "Splices3", len(msg), func(b *testing.B) {
		var sp [3]Splice
		tok, id := []byte(`987654`), []byte(`"r7:12345"`)
		for b.Loop() {
			sp = [3]Splice{
				{Old: m.ProgressToken, New: tok},
				{Old: m.ID, New: id},
				{Old: m.Name[:len("search_")], New: nil},
			}
			dst = AppendSplices(dst[:0], msg, sp[:])
		}
	})
	list := []byte(toolsListResult(50))
	out := make([]byte, 0, 2*len(list))
	measure(b, "PrefixListNames50", len(list), func(b *testing.B) {
		for b.Loop() {
			out, _ = AppendPrefixListNames(out[:0], list, "tools", "name", "backend1__")
		}
	})
	prefixed, _ := AppendPrefixListNames(nil, list, "tools", "name", "backend1__")
	measure(b, "StripListNames50", len(prefixed), func(b *testing.B) {
		for b.Loop() {
			out, _ = AppendStripListNames(out[:0], prefixed, "tools", "name", "backend1__")
		}
	})
}

// toolsListResult builds a tools/list result with n tools.
func toolsListResult(n int) string {
	var bb bytes.Buffer
	bb.WriteString(`{"tools":[`)
	for i := range n {
		if i > 0 {
			bb.WriteByte(',')
		}
		bb.WriteString(`{"name":"tool_`)
		bb.WriteString(string(rune('a' + i%26)))
		bb.WriteString(`","description":"Does a thing with \"quotes\" and more words to read","inputSchema":{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}}`)
	}
	bb.WriteString(`],"nextCursor":"abc"}`)
	return bb.String()
}

// BenchmarkEncode measures the encoders.
func BenchmarkEncode(b *testing.B) {
	dst := make([]byte, 0, 4096)
	result := []byte(`{"content":[{"type":"text","text":"ok"}]}`)
	id := []byte(`"r7:12345"`)
	measure(b, "Result", 0, func(b *testing.B) {
		for b.Loop() {
			dst = AppendResult(dst[:0], id, result)
		}
		b.SetBytes(int64(len(dst)))
	})
	measure(b, "Error", 0, func(b *testing.B) {
		for b.Loop() {
			dst = AppendError(dst[:0], id, CodeMethodNotFound, "Method not found: tools/frobnicate", []byte(`{"method":"tools/frobnicate"}`))
		}
		b.SetBytes(int64(len(dst)))
	})
	measure(b, "Request", 0, func(b *testing.B) {
		for b.Loop() {
			dst = AppendRequest(dst[:0], id, "tools/call", result)
		}
		b.SetBytes(int64(len(dst)))
	})
	measure(b, "Notification", 0, func(b *testing.B) {
		for b.Loop() {
			dst = AppendNotification(dst[:0], "notifications/progress", []byte(`{"progressToken":"p1","progress":50,"total":100}`))
		}
		b.SetBytes(int64(len(dst)))
	})
	text := string(loadBench(b, "read64k"))
	measure(b, "String64k", len(text), func(b *testing.B) {
		big := make([]byte, 0, 2*len(text))
		for b.Loop() {
			big = AppendString(big[:0], text)
		}
	})
}

// BenchmarkDecoder measures the streaming decoder (framing only) over a stream of
// newline-delimited messages, read in 4 KB chunks.
func BenchmarkDecoder(b *testing.B) {
	for _, name := range []string{"call199", "read64k", "batch100"} {
		msg := loadBench(b, name)
		var stream []byte
		for len(stream) < 256<<10 {
			stream = append(stream, msg...)
			stream = append(stream, '\n')
		}
		measure(b, name, len(stream), func(b *testing.B) {
			r := &testio.ChunkReader{}
			for b.Loop() {
				r.Reset(stream, 4096)
				d := NewDecoder(r, 1<<20)
				for {
					if _, err := d.Next(); err != nil {
						break
					}
				}
			}
		})
	}
}
