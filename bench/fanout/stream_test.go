package fanout

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/mcprouter/mcprouter/internal/golden"
)

// parseStream reads a whole GET response the way a session does: head, then chunked or
// plain body, then SSE events. bufSize is the size of both bufio layers (the production
// sizes, or the smallest, which forces long lines through the assembling path).
func parseStream(r io.Reader, headBuf, bodyBuf int) (events []string, end error) {
	br := bufio.NewReaderSize(r, headBuf)
	chunked, err := readHead(br)
	if err != nil {
		return nil, err
	}
	var body io.Reader = br
	if chunked {
		body = &chunkedReader{br: br}
	}
	er := eventReader{br: bufio.NewReaderSize(body, bodyBuf)}
	for i := 0; i < 1<<16; i++ {
		data, err := er.Next()
		if err != nil {
			return events, err
		}
		events = append(events, string(data))
	}
	return events, errors.New("too many events")
}

// errClass names an outcome for golden files and comparisons.
func errClass(err error) string {
	switch {
	case err == nil:
		return "nil"
	case err == io.EOF:
		return "EOF"
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "unexpected EOF"
	case errors.Is(err, ErrStatus):
		return "status"
	case errors.Is(err, ErrMalformed):
		return "malformed"
	case errors.Is(err, ErrTooLong):
		return "too long"
	}
	return "other: " + err.Error()
}

func render(events []string, end error) string {
	var b strings.Builder
	for _, e := range events {
		fmt.Fprintf(&b, "event %s\n", strconv.Quote(e))
	}
	fmt.Fprintf(&b, "end %s\n", errClass(end))
	return b.String()
}

// TestStreamGolden parses every testdata/streams/*.http with the production buffer
// sizes, with the smallest buffers, and one byte per read, and compares with its
// .golden file.
func TestStreamGolden(t *testing.T) {
	for _, file := range golden.Inputs(t, filepath.Join("testdata", "streams", "*.http")) {
		t.Run(filepath.Base(file.Path), func(t *testing.T) {
			in := file.Data
			got := render(parseStream(bytes.NewReader(in), 2048, 1024))
			golden.Check(t, strings.TrimSuffix(file.Path, ".http")+".golden", []byte(got))
			if small := render(parseStream(iotest.OneByteReader(bytes.NewReader(in)), 16, 16)); small != got {
				t.Errorf("one byte per read, 16-byte buffers:\n%s\nwant:\n%s", small, got)
			}
		})
	}
}

func TestReadHead(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		chunked bool
		err     string
	}{
		{"chunked", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", true, "nil"},
		{"lf only", "HTTP/1.1 200 OK\nTransfer-Encoding: chunked\n\n", true, "nil"},
		{"identity", "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n", false, "nil"},
		{"coding list", "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", true, "nil"},
		{"chunked not last", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n", false, "nil"},
		{"http/1.0", "HTTP/1.0 200 OK\r\n\r\n", false, "nil"},
		{"no reason", "HTTP/1.1 200 \r\n\r\n", false, "nil"},
		{"404", "HTTP/1.1 404 Not Found\r\n\r\n", false, "status"},
		{"400", "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n", false, "status"},
		{"not http", "hello\r\n\r\n", false, "malformed"},
		{"short status", "HTTP/1.1 20\r\n\r\n", false, "malformed"},
		{"header without colon", "HTTP/1.1 200 OK\r\nbroken\r\n\r\n", false, "malformed"},
		{"cut", "HTTP/1.1 200 OK\r\nA: b\r\n", false, "unexpected EOF"},
		{"empty", "", false, "unexpected EOF"},
		{"huge header", "HTTP/1.1 200 OK\r\nA: " + strings.Repeat("x", maxHeadLine) + "\r\n\r\n", false, "too long"},
		{"too many headers", "HTTP/1.1 200 OK\r\n" + strings.Repeat("A: b\r\n", maxHeadLines) + "\r\n", false, "malformed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			chunked, err := readHead(bufio.NewReader(strings.NewReader(tt.in)))
			if errClass(err) != tt.err || chunked != tt.chunked {
				t.Errorf("readHead = %v, %v (%s); want %v, %s", chunked, err, errClass(err), tt.chunked, tt.err)
			}
		})
	}
}

func TestChunkedReader(t *testing.T) {
	tests := []struct {
		name, in, want, err string
	}{
		{"two chunks", "3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n", "abcde", "EOF"},
		{"extension and trailer", "3;x=y\r\nabc\r\n0\r\nT: 1\r\n\r\n", "abc", "EOF"},
		{"hex", "a\r\n0123456789\r\n0\r\n\r\n", "0123456789", "EOF"},
		{"uppercase hex", "A\r\n0123456789\r\n0\r\n\r\n", "0123456789", "EOF"},
		{"lf only", "3\nabc\n0\n\n", "abc", "EOF"},
		{"bad size", "x\r\nabc\r\n", "", "malformed"},
		{"empty size", "\r\nabc\r\n", "", "malformed"},
		{"data past size", "2\r\nabc\r\n", "ab", "malformed"},
		{"cut in data", "5\r\nab", "ab", "unexpected EOF"},
		{"cut before last chunk", "3\r\nabc\r\n", "abc", "unexpected EOF"},
		{"cut in trailer", "0\r\nT: 1\r\n", "", "unexpected EOF"},
		{"huge size", "ffffffffffffffffff\r\n", "", "too long"},
		{"long header", strings.Repeat("0", 300) + "1\r\na\r\n", "", "malformed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cr := &chunkedReader{br: bufio.NewReader(strings.NewReader(tt.in))}
			got, err := io.ReadAll(cr)
			if err == nil {
				err = io.EOF // ReadAll swallows the EOF
			}
			if string(got) != tt.want || errClass(err) != tt.err {
				t.Errorf("got %q, %s (%v); want %q, %s", got, errClass(err), err, tt.want, tt.err)
			}
		})
	}
}

// FuzzStream: any input parses without panic or endless loop, and the outcome does not
// depend on how the bytes arrive or on the buffer sizes.
func FuzzStream(f *testing.F) {
	for _, file := range golden.Inputs(f, filepath.Join("testdata", "streams", "*.http")) {
		f.Add(file.Data)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		ev1, end1 := parseStream(bytes.NewReader(in), 2048, 1024)
		ev2, end2 := parseStream(iotest.OneByteReader(bytes.NewReader(in)), 16, 16)
		if render(ev1, end1) != render(ev2, end2) {
			t.Fatalf("outcome depends on reads:\n%s\nvs\n%s", render(ev1, end1), render(ev2, end2))
		}
	})
}

// BenchmarkStreamRead: the client side's cost per event of a router's GET stream (one
// event per chunk, as the router flushes them), from bytes to the event's data.
func BenchmarkStreamRead(b *testing.B) {
	event := []byte("id: 0-1\ndata: " + string(payload("memo://board")) + "\n\n")
	var one []byte
	one = fmt.Appendf(one, "%x\r\n", len(event))
	one = append(append(one, event...), "\r\n"...)
	const perRun = 1000
	body := bytes.Repeat(one, perRun)
	r := bytes.NewReader(body)
	br := bufio.NewReaderSize(r, 2048)
	er := eventReader{br: bufio.NewReaderSize(&chunkedReader{br: br}, 1024)}
	b.SetBytes(int64(len(one)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%perRun == 0 {
			r.Reset(body)
			br.Reset(r)
			er.br.Reset(&chunkedReader{br: br})
		}
		if _, err := er.Next(); err != nil {
			b.Fatal(err)
		}
	}
}
