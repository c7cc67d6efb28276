package upstream

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/mcprouter/mcprouter/internal/golden"
	"github.com/mcprouter/mcprouter/internal/testio"
)

// renderSSE reads every event of r and renders them, with the final last-event-id and
// retry and the error that ended the stream, as text.
func renderSSE(r io.Reader, max int) string {
	sr := newSSEReader(r, max)
	defer sr.release()
	var out strings.Builder
	for i := 0; i < 1<<16; i++ {
		ev, err := sr.next()
		if err != nil {
			end := "EOF"
			switch {
			case errors.Is(err, ErrTooLarge):
				end = "too large"
			case err != io.EOF:
				end = err.Error()
			}
			fmt.Fprintf(&out, "end=%s last-id=%q retry=%d\n", end, sr.lastID, sr.retry)
			break
		}
		fmt.Fprintf(&out, "event=%q message=%v data=%q\n", ev.Event, ev.isMessage(), ev.Data)
	}
	return out.String()
}

func TestSSEReaderGolden(t *testing.T) {
	for _, file := range golden.Inputs(t, filepath.Join("testdata", "sse", "*.sse")) {
		t.Run(filepath.Base(file.Path), func(t *testing.T) {
			in := file.Data
			got := renderSSE(bytes.NewReader(in), 1<<20)
			golden.Check(t, strings.TrimSuffix(file.Path, ".sse")+".golden", []byte(got))
			for _, n := range []int{1, 2, 3, 7, 64} {
				if c := renderSSE(testio.NewChunkReader(in, n), 1<<20); c != got {
					t.Fatalf("read in %d-byte chunks:\n%s\nwhole:\n%s", n, c, got)
				}
			}
		})
	}
}

func TestSSEReaderTooLarge(t *testing.T) {
	in := "data: " + strings.Repeat("x", 100) + "\n\n"
	if got := renderSSE(strings.NewReader(in), 50); !strings.Contains(got, "end=too large") {
		t.Fatalf("an event over the limit was accepted: %s", got)
	}
}

func FuzzSSEReader(f *testing.F) {
	for _, file := range golden.Inputs(f, filepath.Join("testdata", "sse", "*.sse")) {
		f.Add(file.Data, uint8(3))
	}
	f.Fuzz(func(t *testing.T, in []byte, split uint8) {
		whole := renderSSE(bytes.NewReader(in), 256)
		if one := renderSSE(iotest.OneByteReader(bytes.NewReader(in)), 256); one != whole {
			t.Fatalf("one byte at a time:\n%s\nwhole:\n%s", one, whole)
		}
		if c := renderSSE(testio.NewChunkReader(in, int(split%32)+1), 256); c != whole {
			t.Fatalf("chunks of %d:\n%s\nwhole:\n%s", split%32+1, c, whole)
		}
	})
}

// renderLines runs readLines and renders what it delivered and dropped.
func renderLines(r io.Reader, max int) string {
	var out strings.Builder
	readLines(r, max, func(m []byte) {
		fmt.Fprintf(&out, "msg %q\n", m)
	}, func(reason string, line []byte) {
		fmt.Fprintf(&out, "bad (%s)\n", reason)
	})
	return out.String()
}

func TestReadLinesGolden(t *testing.T) {
	for _, file := range golden.Inputs(t, filepath.Join("testdata", "stdout", "*.txt")) {
		got := renderLines(bytes.NewReader(file.Data), 1<<20)
		golden.Check(t, strings.TrimSuffix(file.Path, ".txt")+".golden", []byte(got))
	}
}

func TestReadLinesLongLines(t *testing.T) {
	long := `{"pad":"` + strings.Repeat("y", 200<<10) + `"}`
	in := long + "\n" + `{"after":1}` + "\n"
	// Longer than the bufio buffer but within the limit: delivered whole.
	var got []string
	readLines(strings.NewReader(in), 1<<20, func(m []byte) { got = append(got, string(m)) }, func(string, []byte) {})
	if len(got) != 2 || got[0] != long || got[1] != `{"after":1}` {
		t.Fatalf("delivered %d messages", len(got))
	}
	// Over the limit: dropped, and the next line still comes through.
	got = got[:0]
	bad := 0
	readLines(strings.NewReader(in), 100<<10, func(m []byte) { got = append(got, string(m)) }, func(string, []byte) { bad++ })
	if len(got) != 1 || got[0] != `{"after":1}` || bad != 1 {
		t.Fatalf("got %q, %d dropped", got, bad)
	}
}

func FuzzReadLines(f *testing.F) {
	for _, file := range golden.Inputs(f, filepath.Join("testdata", "stdout", "*.txt")) {
		f.Add(file.Data)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		const max = 64
		readLines(iotest.OneByteReader(bytes.NewReader(in)), max, func(m []byte) {
			if len(m) == 0 || len(m) > max || (m[0] != '{' && m[0] != '[') {
				t.Fatalf("delivered %q", m)
			}
		}, func(string, []byte) {})
		if a, b := renderLines(bytes.NewReader(in), max), renderLines(iotest.OneByteReader(bytes.NewReader(in)), max); a != b {
			t.Fatalf("depends on chunking:\n%s\nvs\n%s", a, b)
		}
	})
}
