package sse

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// dirtyStream leaves every piece of per-stream state set: a BOM consumed, a last event
// ID, a retry time, an event type and data pending, a line half read, and a sticky error.
func dirtyStream() io.Reader {
	return io.MultiReader(
		strings.NewReader("\xEF\xBB\xBFid: old\nretry: 5\ndata: x\n\nevent: e\ndata: pending\nid: half"),
		iotest.ErrReader(errors.New("connection reset")),
	)
}

// TestReaderReset checks that a Reset Reader reads every input exactly as a new Reader
// does, whatever the previous stream left behind.
func TestReaderReset(t *testing.T) {
	for name, in := range parseInputs(t) {
		t.Run(name, func(t *testing.T) {
			want := feedChunks(0, in).String()
			r := NewReader(dirtyStream(), 0)
			if got := readAll(r); got.err == nil || got.lastID != "old" || got.retry != 5 {
				t.Fatalf("dirty stream: %v", got)
			}
			r.Reset(iotest.OneByteReader(bytes.NewReader(in)))
			if got := readAll(r).String(); got != want {
				t.Errorf("after Reset:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

// TestReaderResetKeepsLimit checks that Reset clears ErrEventTooLarge but keeps the
// event size bound.
func TestReaderResetKeepsLimit(t *testing.T) {
	big := "data: " + strings.Repeat("x", 64) + "\n\n"
	r := NewReaderSize(strings.NewReader(big), 8, 32)
	if _, err := r.Next(); !errors.Is(err, ErrEventTooLarge) {
		t.Fatalf("err %v, want ErrEventTooLarge", err)
	}
	r.Reset(strings.NewReader("data: ok\n\n"))
	if ev, err := r.Next(); err != nil || string(ev.Data) != "ok" {
		t.Fatalf("after Reset: %q %v", ev.Data, err)
	}
	r.Reset(strings.NewReader(big))
	if _, err := r.Next(); !errors.Is(err, ErrEventTooLarge) {
		t.Fatalf("limit lost by Reset: err %v", err)
	}
}

// TestNewReaderSize reads every input through read buffers of several sizes.
func TestNewReaderSize(t *testing.T) {
	for name, in := range parseInputs(t) {
		want := feedChunks(0, in).String()
		for _, size := range []int{-1, 0, 1, 3, 4096} {
			if got := readAll(NewReaderSize(bytes.NewReader(in), size, 0)).String(); got != want {
				t.Errorf("%s, size %d:\n%s\nwant:\n%s", name, size, got, want)
			}
		}
	}
}

// TestReaderResetAllocs checks that a warm Reader reads stream after stream without
// allocating: the reason Reset exists.
func TestReaderResetAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under the race detector")
	}
	in := []byte("id: 1\nretry: 100\n\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\n\n")
	src := bytes.NewReader(in)
	r := NewReaderSize(src, 256, 0)
	read := func() {
		src.Reset(in)
		r.Reset(src)
		if ev, err := r.Next(); err != nil || len(ev.Data) == 0 {
			t.Fatalf("%q %v", ev.Data, err)
		}
		if _, err := r.Next(); err != io.EOF {
			t.Fatalf("end: %v", err)
		}
	}
	read() // warm the buffers
	if n := testing.AllocsPerRun(100, read); n != 0 {
		t.Errorf("Reset and Next allocate %v times per stream", n)
	}
}
