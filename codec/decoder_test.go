package codec

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/mcprouter/mcprouter/internal/testio"
)

func data(s string) frameRec { return frameRec{Data: s} }
func elem(s string) frameRec { return frameRec{Data: s, InBatch: true} }
func batchEnd() frameRec     { return frameRec{Nil: true, InBatch: true, BatchEnd: true} }
func parseErr(data string, off int, reason string) frameRec {
	return frameRec{Data: data, Nil: data == "", Code: CodeParseError, Offset: off, Reason: reason}
}

func TestDecoderFrames(t *testing.T) {
	tests := []struct {
		name string
		in   string
		max  int
		want []frameRec
	}{
		{"empty", "", 0, nil},
		{"byte order mark", "\xEF\xBB\xBF{\"a\":1}", 0, []frameRec{data(`{"a":1}`)}},
		{"byte order mark alone", "\xEF\xBB\xBF", 0, nil},
		{"partial byte order mark", "\xEF\xBB", 0, []frameRec{{Data: "\xEF", Code: CodeParseError, Reason: reasonUnexpected}}},
		{"byte order mark mid-stream", "{}\n\xEF\xBB\xBF{}\n[]", 0, []frameRec{data(`{}`),
			{Data: "\xEF", Code: CodeParseError, Reason: reasonUnexpected},
			{Nil: true, Code: CodeInvalidRequest, Reason: reasonEmptyBatch}}},
		{"whitespace only", " \n\t\r\n", 0, nil},
		{"ndjson", "{\"a\":1}\n{\"b\":2}\n", 0, []frameRec{data(`{"a":1}`), data(`{"b":2}`)}},
		{"concatenated", `{"a":1}{"b":2}  {"c":[]}`, 0, []frameRec{data(`{"a":1}`), data(`{"b":2}`), data(`{"c":[]}`)}},
		{"brackets in strings", `{"a":"}]\"{["}`, 0, []frameRec{data(`{"a":"}]\"{["}`)}},
		{"crlf", "{\"a\":1}\r\n{\"b\":2}\r\n", 0, []frameRec{data(`{"a":1}`), data(`{"b":2}`)}},
		{"batch", `[{"a":1}, 2 ,"s", [3], {"b":"]"}]`, 0, []frameRec{
			elem(`{"a":1}`), elem(`2`), elem(`"s"`), elem(`[3]`), elem(`{"b":"]"}`), batchEnd()}},
		{"batch then message", "[{\"a\":1}]\n{\"b\":2}", 0, []frameRec{elem(`{"a":1}`), batchEnd(), data(`{"b":2}`)}},
		{"empty batch", "[ ]\n{}", 0, []frameRec{
			{Nil: true, Code: CodeInvalidRequest, Reason: reasonEmptyBatch}, data(`{}`)}},
		{"scalars", "42 true \"x\" -1.5e3", 0, []frameRec{data(`42`), data(`true`), data(`"x"`), data(`-1.5e3`)}},
		{"scalar at eof in batch", `[1,2`, 0, []frameRec{elem(`1`), elem(`2`),
			{Nil: true, InBatch: true, BatchEnd: true, Code: CodeParseError, Offset: 4, Reason: reasonEOF}}},
		{"garbage line resync", "hello world\n{\"a\":1}\n", 0, []frameRec{
			{Data: "h", Code: CodeParseError, Reason: reasonUnexpected}, data(`{"a":1}`)}},
		{"raw newline in string resyncs on it", "{\"a\":\"x\n{\"b\":1}\n", 0, []frameRec{
			parseErr("{\"a\":\"x\n", 7, reasonControl), data(`{"b":1}`)}},
		{"mismatched bracket", "{\"a\":[1}\n{\"b\":1}", 0, []frameRec{
			parseErr(`{"a":[1}`, 7, reasonExpectComma), data(`{"b":1}`)}},
		{"batch missing comma", "[{\"a\":1} {\"b\":2}]\n{\"c\":3}", 0, []frameRec{
			elem(`{"a":1}`),
			{Nil: true, InBatch: true, BatchEnd: true, Code: CodeParseError, Offset: 9, Reason: reasonExpectComma},
			data(`{"c":3}`)}},
		{"batch trailing comma", "[1,]\n{}", 0, []frameRec{
			elem(`1`),
			{Nil: true, InBatch: true, BatchEnd: true, Code: CodeParseError, Offset: 3, Reason: reasonUnexpected},
			data(`{}`)}},
		{"truncated message", `{"a":[1,`, 0, []frameRec{parseErr(`{"a":[1,`, 8, reasonEOF)}},
		{"truncated string", `"abc`, 0, []frameRec{parseErr(`"abc`, 4, reasonEOF)}},
		{"escaped quote at chunk edges", `{"a":"\\\"x"}`, 0, []frameRec{data(`{"a":"\\\"x"}`)}},
		{"escaped control char", "{\"a\":\"\\\n\"}\n{}", 0, []frameRec{
			parseErr("{\"a\":\"\\\n", 7, reasonControl), parseErr("\"}\n", 2, reasonControl), data(`{}`)}},
		{"exactly max", `{"a":"12345"}`, 13, []frameRec{data(`{"a":"12345"}`)}},
		{"one over max", `{"a":"123456"} {}`, 13, []frameRec{
			{Data: `{"a":"123456"`, Code: CodeInvalidRequest, Offset: 13, Reason: reasonTooLarge, TooLarge: true}, data(`{}`)}},
		{"too large skipped by brackets", "{\"a\":\"]}]}\",\"b\":[[[[]]]],\"c\":\"0123456789\"}\n{\"ok\":1}", 8, []frameRec{
			{Data: `{"a":"]}`, Code: CodeInvalidRequest, Offset: 8, Reason: reasonTooLarge, TooLarge: true}, data(`{"ok":1}`)}},
		{"too large element keeps siblings", `[{"x":"0123456789"},{"y":1}]`, 8, []frameRec{
			{Data: `{"x":"01`, InBatch: true, Code: CodeInvalidRequest, Offset: 8, Reason: reasonTooLarge, TooLarge: true},
			elem(`{"y":1}`), batchEnd()}},
		{"scalar exactly max", "12345 1", 5, []frameRec{data(`12345`), data(`1`)}},
		{"scalar over max", "123456 1", 5, []frameRec{
			{Data: `12345`, Code: CodeInvalidRequest, Offset: 5, Reason: reasonTooLarge, TooLarge: true}, data(`1`)}},
		{"too large cut by eof", `{"a":"0123456789`, 8, []frameRec{
			{Data: `{"a":"01`, Code: CodeInvalidRequest, Offset: 8, Reason: reasonTooLarge, TooLarge: true}}},
		{"max reached exactly at eof", `{"a":"01`, 8, []frameRec{parseErr(`{"a":"01`, 8, reasonEOF)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			max := tt.max
			if max == 0 {
				max = 1 << 10
			}
			got := decodeAll(t, strings.NewReader(tt.in), max)
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("\n got %+v\nwant %+v", got, tt.want)
			}
			// Same frames one byte at a time.
			if got1 := decodeAll(t, testio.NewChunkReader([]byte(tt.in), 1), max); !reflect.DeepEqual(got1, tt.want) {
				t.Fatalf("byte by byte:\n got %+v\nwant %+v", got1, tt.want)
			}
		})
	}
}

// splitReader returns a[:] then b[:] in two reads.
type splitReader struct{ parts [][]byte }

func (r *splitReader) Read(p []byte) (int, error) {
	for len(r.parts) > 0 && len(r.parts[0]) == 0 {
		r.parts = r.parts[1:]
	}
	if len(r.parts) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.parts[0])
	r.parts[0] = r.parts[0][n:]
	return n, nil
}

// decoderStream is a stream with every kind of frame: the small corpus messages
// (compacted onto one line each, so that a message is also one line), a batch, a
// garbage line, an oversized message, a broken batch.
func decoderStream(t *testing.T) []byte {
	var s bytes.Buffer
	s.WriteString("\xEF\xBB\xBF")
	for _, name := range []string{"valid_resources_read_uri", "valid_escaped_name", "valid_error_null_id", "valid_cancelled_numeric"} {
		s.Write(bytes.TrimSpace(readTestdata(t, "scan/"+name+".json")))
		s.WriteByte('\n')
	}
	s.WriteString(`[{"jsonrpc":"2.0","id":1,"method":"ping"}, 7, {"jsonrpc":"2.0","method":"x"}]` + "\n")
	s.WriteString("not json at all\n")
	s.WriteString(`{"jsonrpc":"2.0","id":2,"method":"big","params":{"pad":"` + strings.Repeat("x", 300) + `"}}` + "\n")
	s.WriteString(`{"a":"\\\"\u00e9"} {"b":[{}]}` + "\n")
	s.WriteString(`[{"jsonrpc":"2.0","id":3,"method":"ping"} oops]` + "\n")
	s.WriteString(`{"jsonrpc":"2.0","id":4,"method":"last"}`)
	return s.Bytes()
}

// TestDecoderSplitEveryByte is the nats-server parser habit: the same stream split at
// every possible point must give the same frames.
func TestDecoderSplitEveryByte(t *testing.T) {
	in := decoderStream(t)
	const max = 256
	want := decodeAll(t, bytes.NewReader(in), max)
	if len(want) < 12 {
		t.Fatalf("stream gave only %d frames", len(want))
	}
	for k := 0; k <= len(in); k++ {
		a, b := bytes.Clone(in[:k]), bytes.Clone(in[k:])
		got := decodeAll(t, &splitReader{parts: [][]byte{a, b}}, max)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("split at %d:\n got %+v\nwant %+v", k, got, want)
		}
	}
	if got := decodeAll(t, testio.NewChunkReader(in, 1), max); !reflect.DeepEqual(got, want) {
		t.Fatal("byte-by-byte reads changed the frames")
	}
}

// TestDecoderFramesScan checks that frames are exactly the messages: each corpus file,
// compacted or not, comes out of the decoder as itself and scans the same.
func TestDecoderFramesScan(t *testing.T) {
	var stream bytes.Buffer
	var want [][]byte
	for _, path := range corpusFiles(t) {
		in := readFile(t, path)
		trimmed := bytes.TrimSpace(in)
		if len(trimmed) == 0 || trimmed[0] != '{' {
			continue
		}
		if _, err := SplitBatch(trimmed, nil); err == nil {
			continue
		}
		var m Message
		if err := Scan(in, &m); err != nil && !errors.Is(err, ErrInvalidRequest) {
			continue // parse errors may break framing on purpose
		}
		stream.Write(in)
		stream.WriteByte('\n')
		want = append(want, trimmed)
	}
	d := NewDecoder(testio.NewChunkReader(stream.Bytes(), 100), 1<<20)
	for k := range want {
		f, err := d.Next()
		if err != nil || f.Err != nil {
			t.Fatalf("frame %d: %v %v", k, err, f.Err)
		}
		if !bytes.Equal(f.Data, want[k]) {
			t.Fatalf("frame %d = %q, want %q", k, f.Data, want[k])
		}
		var m1, m2 Message
		e1, e2 := Scan(f.Data, &m1), Scan(want[k], &m2)
		if (e1 == nil) != (e2 == nil) || m1.Kind != m2.Kind || !bytes.Equal(m1.ID, m2.ID) {
			t.Fatalf("frame %d scans differently", k)
		}
	}
	if _, err := d.Next(); err != io.EOF {
		t.Fatalf("after the last frame: %v, want io.EOF", err)
	}
	if _, err := d.Next(); err != io.EOF {
		t.Fatalf("EOF is not sticky: %v", err)
	}
}

func TestDecoderReaderError(t *testing.T) {
	boom := errors.New("boom")
	d := NewDecoder(io.MultiReader(strings.NewReader("{\"a\":1}\n{\"b\":"), iotest.ErrReader(boom)), 0)
	f, err := d.Next()
	if err != nil || string(f.Data) != `{"a":1}` {
		t.Fatalf("first frame: %q %v", f.Data, err)
	}
	for range 2 {
		if _, err := d.Next(); err != boom {
			t.Fatalf("got %v, want the reader's error (sticky)", err)
		}
	}
}

type zeroReader struct{}

func (zeroReader) Read([]byte) (int, error) { return 0, nil }

func TestDecoderNoProgress(t *testing.T) {
	if _, err := NewDecoder(zeroReader{}, 0).Next(); err != io.ErrNoProgress {
		t.Fatalf("got %v, want io.ErrNoProgress", err)
	}
}

// endless yields an endless JSON string body after a prefix.
type endless struct {
	prefix []byte
	n      int
}

func (r *endless) Read(p []byte) (int, error) {
	if r.n <= 0 {
		return 0, io.EOF
	}
	if len(r.prefix) > 0 {
		n := copy(p, r.prefix)
		r.prefix = r.prefix[n:]
		return n, nil
	}
	n := min(len(p), r.n)
	for i := range n {
		p[i] = 'x'
	}
	r.n -= n
	return n, nil
}

// TestDecoderBoundedMemory streams a 16 MB message through a decoder limited to 1 KB:
// it is reported once and its bytes are never buffered.
func TestDecoderBoundedMemory(t *testing.T) {
	const max = 1024
	d := NewDecoder(&endless{prefix: []byte(`{"a":"`), n: 16 << 20}, max)
	f, err := d.Next()
	if err != nil || !errors.Is(f.Err, ErrTooLarge) || len(f.Data) != max {
		t.Fatalf("got %v, %v (%d bytes), want too large", err, f.Err, len(f.Data))
	}
	if _, err := d.Next(); err != io.EOF {
		t.Fatalf("got %v, want io.EOF (the oversized message is cut short by the end)", err)
	}
	if c := cap(d.buf); c > max+1+minRead {
		t.Fatalf("buffer grew to %d bytes", c)
	}
}

func TestDecoderReset(t *testing.T) {
	d := NewDecoder(strings.NewReader(`{"a":1} {"b":`), 64)
	if f, err := d.Next(); err != nil || string(f.Data) != `{"a":1}` {
		t.Fatalf("first stream: %q %v", f.Data, err)
	}
	buf := d.buf
	d.Reset(strings.NewReader("\xEF\xBB\xBF[1]"))
	want := []frameRec{elem("1"), batchEnd()}
	for k := range want {
		f, err := d.Next()
		if err != nil {
			t.Fatal(err)
		}
		got := frameRec{Data: string(f.Data), Nil: f.Data == nil, InBatch: f.InBatch, BatchEnd: f.BatchEnd}
		if got != want[k] {
			t.Fatalf("frame %d: %+v, want %+v", k, got, want[k])
		}
	}
	if _, err := d.Next(); err != io.EOF {
		t.Fatalf("got %v, want io.EOF", err)
	}
	if &d.buf[:1][0] != &buf[:1][0] {
		t.Fatal("Reset dropped the buffer")
	}
}

func TestDecoderErrorsMatchSentinels(t *testing.T) {
	d := NewDecoder(strings.NewReader(`{"a":"`+strings.Repeat("x", 100)+`"}`), 10)
	f, _ := d.Next()
	if !errors.Is(f.Err, ErrTooLarge) || !errors.Is(f.Err, ErrInvalidRequest) || errors.Is(f.Err, ErrParse) {
		t.Fatalf("too large error %v matches the wrong sentinels", f.Err)
	}
	var e *Error
	if !errors.As(f.Err, &e) || e.Code != CodeInvalidRequest {
		t.Fatalf("too large error %v: want an *Error with CodeInvalidRequest", f.Err)
	}
}

func readTestdata(t *testing.T, name string) []byte {
	return readFile(t, filepath.Join("testdata", filepath.FromSlash(name)))
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
