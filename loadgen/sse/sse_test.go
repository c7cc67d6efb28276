package sse

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"
)

// ev is a comparable copy of an Event.
type ev struct{ Type, Data, ID string }

// parseAll runs the parser over chunks and copies out every event.
func parseAll(t testing.TB, max int, chunks ...[]byte) ([]ev, Parser, error) {
	t.Helper()
	var p Parser
	p.MaxEvent = max
	var out []ev
	for _, c := range chunks {
		for len(c) > 0 {
			n, e, err := p.Feed(c)
			if err != nil {
				return out, p, err
			}
			if n == 0 && e == nil {
				t.Fatalf("Feed made no progress on %q", c)
			}
			c = c[n:]
			if e != nil {
				out = append(out, ev{string(e.Type), string(e.Data), string(e.ID)})
			}
		}
	}
	return out, p, nil
}

func TestParser(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []ev
	}{
		{"empty", "", nil},
		{"one", "data: x\n\n", []ev{{"message", "x", ""}}},
		{"no space", "data:x\n\n", []ev{{"message", "x", ""}}},
		{"two spaces keep one", "data:  x\n\n", []ev{{"message", " x", ""}}},
		{"multi line", "data: a\ndata: b\n\n", []ev{{"message", "a\nb", ""}}},
		{"typed", "event: endpoint\ndata: /m?s=1\n\n", []ev{{"endpoint", "/m?s=1", ""}}},
		{"type resets", "event: e\ndata: 1\n\ndata: 2\n\n", []ev{{"e", "1", ""}, {"message", "2", ""}}},
		{"id persists", "id: 5\ndata: a\n\ndata: b\n\n", []ev{{"message", "a", "5"}, {"message", "b", "5"}}},
		{"id cleared", "id: 5\ndata: a\n\nid\ndata: b\n\n", []ev{{"message", "a", "5"}, {"message", "b", ""}}},
		{"id with NUL ignored", "id: 5\ndata: a\n\nid: x\x00y\ndata: b\n\n", []ev{{"message", "a", "5"}, {"message", "b", "5"}}},
		{"priming event is not dispatched without data", "id: p1\n\ndata: a\n\n", []ev{{"message", "a", "p1"}}},
		{"empty data dispatches", "id: p1\ndata:\n\n", []ev{{"message", "", "p1"}}},
		{"comment", ": keepalive\n\ndata: a\n\n", []ev{{"message", "a", ""}}},
		{"CRLF", "data: a\r\n\r\n", []ev{{"message", "a", ""}}},
		{"CR", "data: a\r\rdata: b\r\r", []ev{{"message", "a", ""}, {"message", "b", ""}}},
		{"unknown field", "foo: bar\ndata: a\n\n", []ev{{"message", "a", ""}}},
		{"incomplete discarded", "data: a\n\ndata: b\n", []ev{{"message", "a", ""}}},
		{"BOM", "\xEF\xBB\xBFdata: a\n\n", []ev{{"message", "a", ""}}},
		{"not a BOM", "\xEF\xBBdata: a\n\n", nil},
		{"colon in value", "data: {\"a\":1}\n\n", []ev{{"message", `{"a":1}`, ""}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _, err := parseAll(t, 0, []byte(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRetry(t *testing.T) {
	tests := []struct {
		in    string
		ms    int
		valid bool
	}{
		{"retry: 1500\n", 1500, true},
		{"retry: 0\n", 0, true},
		{"retry: 15x\n", 0, false},
		{"retry:\n", 0, false},
	}
	for _, tt := range tests {
		_, p, err := parseAll(t, 0, []byte(tt.in))
		if err != nil {
			t.Fatal(err)
		}
		if p.HasRetry != tt.valid || p.Retry != tt.ms {
			t.Errorf("%q: retry %d,%v want %d,%v", tt.in, p.Retry, p.HasRetry, tt.ms, tt.valid)
		}
	}
}

func TestTooLarge(t *testing.T) {
	tests := []struct{ name, in string }{
		{"long line", "data: " + strings.Repeat("x", 100) + "\n\n"},
		{"long unterminated line", "data: " + strings.Repeat("x", 100)},
		{"many data lines", strings.Repeat("data: 0123456789\n", 10) + "\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := parseAll(t, 64, []byte(tt.in))
			if !errors.Is(err, ErrTooLarge) {
				t.Fatalf("err = %v, want ErrTooLarge", err)
			}
		})
	}
}

// TestSplitEverywhere feeds every golden stream split at every point (and one byte at
// a time) and expects the events of the one-shot parse.
func TestSplitEverywhere(t *testing.T) {
	for _, name := range goldenFiles(t) {
		in := readFile(t, name)
		t.Run(filepath.Base(name), func(t *testing.T) {
			want, _, err := parseAll(t, 0, in)
			if err != nil {
				t.Fatal(err)
			}
			checkGolden(t, name, want)
			for i := 0; i <= len(in); i++ {
				got, _, err := parseAll(t, 0, in[:i], in[i:])
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Fatalf("split at %d (-want +got):\n%s", i, diff)
				}
			}
			rd := NewReader(iotest.OneByteReader(bytes.NewReader(in)), 1, 0)
			var got []ev
			for {
				e, err := rd.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, ev{string(e.Type), string(e.Data), string(e.ID)})
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("one byte reader (-want +got):\n%s", diff)
			}
		})
	}
}

func goldenFiles(t testing.TB) []string {
	names, err := filepath.Glob(filepath.Join("testdata", "*.sse"))
	if err != nil || len(names) == 0 {
		t.Fatalf("no golden inputs: %v", err)
	}
	return names
}

func readFile(t testing.TB, name string) []byte {
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// checkGolden compares the events with name's .golden file (rewritten with -update).
func checkGolden(t *testing.T, name string, got []ev) {
	var b strings.Builder
	for _, e := range got {
		fmt.Fprintf(&b, "type=%q id=%q data=%q\n", e.Type, e.ID, e.Data)
	}
	golden := strings.TrimSuffix(name, ".sse") + ".golden"
	if *update {
		if err := os.WriteFile(golden, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want := readFile(t, golden)
	if diff := cmp.Diff(string(want), b.String()); diff != "" {
		t.Errorf("golden %s (-want +got):\n%s", golden, diff)
	}
}

func TestReaderErrors(t *testing.T) {
	boom := errors.New("boom")
	rd := NewReader(io.MultiReader(strings.NewReader("data: a\n\ndata: b"), iotest.ErrReader(boom)), 0, 0)
	e, err := rd.Next()
	if err != nil || string(e.Data) != "a" {
		t.Fatalf("first: %v %v", e, err)
	}
	if _, err := rd.Next(); !errors.Is(err, boom) {
		t.Fatalf("second: err = %v, want boom", err)
	}
	rd.Reset(strings.NewReader("id: 9\ndata: c\n\n"))
	e, err = rd.Next()
	if err != nil || string(e.Data) != "c" || string(e.ID) != "9" {
		t.Fatalf("after reset: %v %v", e, err)
	}
}

// FuzzParser checks that chunking never changes the result and that the parser never
// panics or stalls.
func FuzzParser(f *testing.F) {
	for _, name := range goldenFiles(f) {
		f.Add(readFile(f, name), uint16(3))
	}
	f.Fuzz(func(t *testing.T, in []byte, split uint16) {
		want, _, errWhole := parseAll(t, 256, in)
		i := int(split) % (len(in) + 1)
		got, _, errSplit := parseAll(t, 256, in[:i], in[i:])
		if (errWhole == nil) != (errSplit == nil) {
			t.Fatalf("errors differ: %v vs %v", errWhole, errSplit)
		}
		if errWhole == nil {
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("split at %d (-whole +split):\n%s", i, diff)
			}
		}
	})
}

func BenchmarkParser(b *testing.B) {
	msg := []byte("event: message\nid: 42\ndata: {\"jsonrpc\":\"2.0\",\"id\":42,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"hi\"}]}}\n\n")
	b.ReportAllocs()
	b.SetBytes(int64(len(msg)))
	var p Parser
	for b.Loop() {
		n, e, err := p.Feed(msg)
		if err != nil || e == nil || n != len(msg) {
			b.Fatal(n, e, err)
		}
	}
}
