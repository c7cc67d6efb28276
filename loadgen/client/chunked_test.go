package client

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// chunkedCases are bodies as servers frame them, with the data they carry.
var chunkedCases = []struct {
	name, raw, want string
}{
	{"events", "7\r\ndata: a\r\n2\r\n\n\n\r\n0\r\n\r\n", "data: a\n\n"},
	{"hex and extension", "1A;name=v\r\nabcdefghijklmnopqrstuvwxyz\r\nb \r\n0123456789A\r\n0\r\nTrailer: x\r\n\r\n", "abcdefghijklmnopqrstuvwxyz0123456789A"},
	{"bare newlines", "3\nabc\n0\n\n", "abc"},
	{"empty", "0\r\n\r\n", ""},
}

// TestChunkedBody decodes each body read in pieces of every size and with every split
// of its bytes between the header reader's leftovers and the connection.
func TestChunkedBody(t *testing.T) {
	for _, tc := range chunkedCases {
		for split := 0; split <= len(tc.raw); split++ {
			for _, bufSize := range []int{1, 2, 5, 512} {
				cb := &chunkedBody{pending: []byte(tc.raw[:split]), r: iotest.HalfReader(strings.NewReader(tc.raw[split:]))}
				got, err := readAllSize(cb, bufSize)
				if err != nil || got != tc.want {
					t.Fatalf("%s split %d buffer %d: %q, %v; want %q", tc.name, split, bufSize, got, err, tc.want)
				}
			}
		}
	}
}

// readAllSize reads r to its end through a buffer of size bytes.
func readAllSize(r io.Reader, size int) (string, error) {
	var out []byte
	buf := make([]byte, size)
	for {
		n, err := r.Read(buf)
		out = append(out, buf[:n]...)
		if err == io.EOF {
			return string(out), nil
		}
		if err != nil {
			return string(out), err
		}
	}
}

func TestChunkedBodyErrors(t *testing.T) {
	for _, tc := range []struct {
		name, raw string
		want      error
	}{
		{"no size", "\r\nabc\r\n0\r\n\r\n", errChunked},
		{"not hex", "g\r\n", errChunked},
		{"no line end after data", "3\r\nabcX\r\n", errChunked},
		{"bad LF", "3\rX", errChunked},
		{"too large", "1000000000000000\r\n", errChunked},
		{"cut in data", "5\r\nab", io.ErrUnexpectedEOF},
		{"cut before the last chunk", "3\r\nabc\r\n", io.ErrUnexpectedEOF},
	} {
		_, err := readAllSize(&chunkedBody{r: strings.NewReader(tc.raw)}, 512)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
}
