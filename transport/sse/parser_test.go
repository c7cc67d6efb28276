package sse

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

// rec is a copy of an Event that outlives the parser's buffers.
type rec struct {
	ID, Type, Data string
	Retry          int
	HasID          bool
}

func recOf(ev Event) rec {
	return rec{ID: string(ev.ID), Type: string(ev.Event), Data: string(ev.Data), Retry: ev.Retry, HasID: ev.HasID}
}

func (r rec) String() string {
	return fmt.Sprintf("event type=%q id=%q hasid=%v retry=%d data=%q", r.Type, r.ID, r.HasID, r.Retry, r.Data)
}

// outcome is everything a parse of a whole input produces.
type outcome struct {
	events []rec
	lastID string
	retry  int
	err    error
}

func (o outcome) String() string {
	var b strings.Builder
	for _, e := range o.events {
		b.WriteString(e.String())
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "end lastid=%q retry=%d err=%v\n", o.lastID, o.retry, o.err)
	return b.String()
}

// feedChunks runs a Parser over the chunks in order.
func feedChunks(max int, chunks ...[]byte) outcome {
	p := NewParser(max)
	var o outcome
	var ev Event
	for _, c := range chunks {
		for len(c) > 0 {
			n, ok, err := p.Feed(c, &ev)
			if err != nil {
				o.err = err
				return o
			}
			if n == 0 && !ok {
				o.err = errors.New("no progress")
				return o
			}
			c = c[n:]
			if ok {
				o.events = append(o.events, recOf(ev))
			}
		}
	}
	o.lastID, o.retry = string(p.LastEventID()), p.Retry()
	return o
}

// bytesOneByOne splits b into one-byte chunks.
func bytesOneByOne(b []byte) [][]byte {
	out := make([][]byte, len(b))
	for i := range b {
		out[i] = b[i : i+1]
	}
	return out
}

// refParse is a deliberately naive reading of the WHATWG rules over a whole input, line by
// line, used as an oracle for the state machine.
func refParse(in []byte) outcome {
	in = bytes.TrimPrefix(in, bom[:])
	var (
		o      outcome
		data   []byte
		typ    string
		idBuf  string
		idSet  bool
		retry  = -1
		lastID string
	)
	for {
		i := bytes.IndexAny(in, "\r\n")
		if i < 0 {
			break // an incomplete last line is discarded
		}
		line := in[:i]
		if in[i] == '\r' && i+1 < len(in) && in[i+1] == '\n' {
			i++
		}
		in = in[i+1:]
		if len(line) == 0 {
			if idSet {
				lastID = idBuf
			}
			hasID := idSet
			idSet = false
			if len(data) == 0 {
				typ = ""
				continue
			}
			o.events = append(o.events, rec{ID: lastID, Type: typ, Data: string(data[:len(data)-1]), Retry: retry, HasID: hasID})
			data, typ = nil, ""
			continue
		}
		if line[0] == ':' {
			continue
		}
		name, value := line, []byte(nil)
		if c := bytes.IndexByte(line, ':'); c >= 0 {
			name, value = line[:c], line[c+1:]
			value = bytes.TrimPrefix(value, []byte(" "))
		}
		switch string(name) {
		case "data":
			data = append(append(data, value...), '\n')
		case "event":
			typ = string(value)
		case "id":
			if bytes.IndexByte(value, 0) < 0 {
				idBuf, idSet = string(value), true
			}
		case "retry":
			if len(value) > 0 && len(bytes.Trim(value, "0123456789")) == 0 {
				v := 0
				for _, c := range value {
					if v > (math.MaxInt32-9)/10 {
						v = math.MaxInt32
					} else {
						v = v*10 + int(c-'0')
					}
				}
				retry = v
			}
		}
	}
	o.lastID, o.retry = lastID, retry
	return o
}

func parseInputs(t testing.TB) map[string][]byte {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "parse", "*.sse"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no testdata: %v", err)
	}
	m := make(map[string][]byte, len(files))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		m[strings.TrimSuffix(filepath.Base(f), ".sse")] = b
	}
	return m
}

// TestParseGolden parses every testdata/parse/*.sse input whole and compares with its
// .golden file and with the naive oracle.
func TestParseGolden(t *testing.T) {
	for name, in := range parseInputs(t) {
		t.Run(name, func(t *testing.T) {
			got := feedChunks(0, in).String()
			if ref := refParse(in).String(); got != ref {
				t.Errorf("parser and oracle disagree\nparser:\n%s\noracle:\n%s", got, ref)
			}
			golden := filepath.Join("testdata", "parse", name+".golden")
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create)", err)
			}
			if got != string(want) {
				t.Errorf("got:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

// TestParseSplitEverywhere checks that the events do not depend on chunking: every input
// split at every byte, and fed one byte at a time.
func TestParseSplitEverywhere(t *testing.T) {
	for name, in := range parseInputs(t) {
		t.Run(name, func(t *testing.T) {
			want := feedChunks(0, in).String()
			for i := 0; i <= len(in); i++ {
				if got := feedChunks(0, in[:i], in[i:]).String(); got != want {
					t.Fatalf("split at %d:\n%s\nwant:\n%s", i, got, want)
				}
				for j := i; j <= len(in); j += 7 {
					if got := feedChunks(0, in[:i], in[i:j], in[j:]).String(); got != want {
						t.Fatalf("split at %d and %d:\n%s\nwant:\n%s", i, j, got, want)
					}
				}
			}
			if got := feedChunks(0, bytesOneByOne(in)...).String(); got != want {
				t.Fatalf("one byte at a time:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

func TestParseTable(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []rec
	}{
		{"default type", "data: x\n\n", []rec{{Data: "x", Retry: -1}}},
		{"trailing LF kept once", "data: x\ndata:\n\n", []rec{{Data: "x\n", Retry: -1}}},
		{"only one space stripped", "data:   x\n\n", []rec{{Data: "  x", Retry: -1}}},
		{"tab is not a space", "data:\tx\n\n", []rec{{Data: "\tx", Retry: -1}}},
		{"CR inside data line ends it", "data: a\rb: c\n\n", []rec{{Data: "a", Retry: -1}}},
		{"id persists", "id: 1\ndata: a\n\ndata: b\n\n", []rec{{ID: "1", Data: "a", Retry: -1, HasID: true}, {ID: "1", Data: "b", Retry: -1}}},
		{"id reset by empty id", "id: 1\ndata: a\n\nid:\ndata: b\n\n", []rec{{ID: "1", Data: "a", Retry: -1, HasID: true}, {ID: "", Data: "b", Retry: -1, HasID: true}}},
		{"id with NUL ignored", "id: 1\ndata: a\n\nid: 2\x00\ndata: b\n\n", []rec{{ID: "1", Data: "a", Retry: -1, HasID: true}, {ID: "1", Data: "b", Retry: -1}}},
		{"last id line wins", "id: 1\nid: 2\ndata: a\n\n", []rec{{ID: "2", Data: "a", Retry: -1, HasID: true}}},
		{"retry persists", "retry: 10\ndata: a\n\ndata: b\n\n", []rec{{Data: "a", Retry: 10}, {Data: "b", Retry: 10}}},
		{"retry with sign ignored", "retry: -5\ndata: a\n\n", []rec{{Data: "a", Retry: -1}}},
		{"retry with space ignored", "retry: 5 \ndata: a\n\n", []rec{{Data: "a", Retry: -1}}},
		{"retry zero", "retry: 0\ndata: a\n\n", []rec{{Data: "a", Retry: 0}}},
		{"no blank line no event", "data: a\n", nil},
		{"comment between fields", "data: a\n: c\ndata: b\n\n", []rec{{Data: "a\nb", Retry: -1}}},
		{"long unknown name", "dataevent: x\ndata: y\n\n", []rec{{Data: "y", Retry: -1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := feedChunks(0, []byte(tt.in))
			if got.err != nil {
				t.Fatal(got.err)
			}
			if fmt.Sprint(got.events) != fmt.Sprint(tt.want) {
				t.Errorf("got  %v\nwant %v", got.events, tt.want)
			}
			if ref := refParse([]byte(tt.in)); fmt.Sprint(ref.events) != fmt.Sprint(tt.want) {
				t.Errorf("oracle %v", ref.events)
			}
		})
	}
}

func TestParseMaxEvent(t *testing.T) {
	tests := []struct {
		in      string
		max     int
		wantErr bool
	}{
		{"data: 12345\n\n", 6, false}, // 5 bytes + LF
		{"data: 123456\n\n", 6, true},
		{"data: 12\ndata: 45\n\n", 6, false},
		{"data: 123\ndata: 456\n\n", 6, true},
		{"event: 1234\ndata: 1\n\n", 6, false},
		{"event: 12345\ndata: 1\n\n", 6, true},
		{"id: 1234567\ndata: 1\n\n", 6, true},
		{": " + strings.Repeat("c", 100) + "\ndata: 1\n\n", 6, false}, // comments are not buffered
		{"unknown: " + strings.Repeat("u", 100) + "\ndata: 1\n\n", 6, false},
		{"data: 1\n\ndata: 2\n\ndata: 3\n\n", 2, false}, // the bound is per event
	}
	for _, tt := range tests {
		in := []byte(tt.in)
		for _, chunks := range [][][]byte{{in}, bytesOneByOne(in)} {
			got := feedChunks(tt.max, chunks...)
			if (got.err != nil) != tt.wantErr || (got.err != nil && !errors.Is(got.err, ErrEventTooLarge)) {
				t.Errorf("%q max %d: err %v, want error %v", tt.in, tt.max, got.err, tt.wantErr)
			}
		}
	}
	// The error is sticky.
	p := NewParser(2)
	var ev Event
	if _, _, err := p.Feed([]byte("data: 123\n\n"), &ev); err != ErrEventTooLarge {
		t.Fatalf("err %v", err)
	}
	if _, _, err := p.Feed([]byte("data: 1\n\n"), &ev); err != ErrEventTooLarge {
		t.Fatalf("second err %v", err)
	}
}

// TestParseDropsHugeBuffer checks that one huge event does not pin its buffer.
func TestParseDropsHugeBuffer(t *testing.T) {
	p := NewParser(0)
	var ev Event
	big := "data: " + strings.Repeat("x", 2*keepBuf) + "\n\n"
	if _, ok, err := p.Feed([]byte(big), &ev); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if _, ok, err := p.Feed([]byte("data: y\n\n"), &ev); !ok || err != nil || string(ev.Data) != "y" {
		t.Fatal(ok, err)
	}
	if cap(p.data) > keepBuf {
		t.Errorf("data buffer of %d bytes kept", cap(p.data))
	}
}

func readAll(r *Reader) outcome {
	var o outcome
	for {
		ev, err := r.Next()
		if err != nil {
			if err != io.EOF {
				o.err = err
			}
			break
		}
		o.events = append(o.events, recOf(ev))
	}
	o.lastID, o.retry = string(r.LastEventID()), r.Retry()
	return o
}

func TestReader(t *testing.T) {
	for name, in := range parseInputs(t) {
		t.Run(name, func(t *testing.T) {
			want := feedChunks(0, in).String()
			readers := map[string]io.Reader{
				"whole":    bytes.NewReader(in),
				"onebyte":  iotest.OneByteReader(bytes.NewReader(in)),
				"half":     iotest.HalfReader(bytes.NewReader(in)),
				"dataerr":  iotest.DataErrReader(bytes.NewReader(in)),
				"timeout":  iotest.TimeoutReader(bytes.NewReader(in)),
				"unbuffer": io.MultiReader(bytes.NewReader(in[:len(in)/2]), bytes.NewReader(in[len(in)/2:])),
			}
			for rn, rd := range readers {
				got := readAll(NewReader(rd, 0))
				if rn == "timeout" {
					if len(in) > 0 && !errors.Is(got.err, iotest.ErrTimeout) {
						t.Errorf("%s: err %v", rn, got.err)
					}
					continue
				}
				if got.String() != want {
					t.Errorf("%s:\n%s\nwant:\n%s", rn, got, want)
				}
			}
		})
	}
}

// emptyReader returns nothing, forever.
type emptyReader struct{}

func (emptyReader) Read([]byte) (int, error) { return 0, nil }

func TestReaderNoProgress(t *testing.T) {
	if _, err := NewReader(emptyReader{}, 0).Next(); err != io.ErrNoProgress {
		t.Fatalf("err %v", err)
	}
}

func TestReaderLargeEventAcrossReads(t *testing.T) {
	data := strings.Repeat("0123456789", 10000) // larger than the read buffer
	in := "data: " + data + "\nid: 9\n\ndata: small\n\n"
	r := NewReader(iotest.HalfReader(strings.NewReader(in)), 0)
	ev, err := r.Next()
	if err != nil || string(ev.Data) != data || string(ev.ID) != "9" {
		t.Fatalf("first event: %v, %d bytes", err, len(ev.Data))
	}
	ev, err = r.Next()
	if err != nil || string(ev.Data) != "small" {
		t.Fatalf("second event: %v %q", err, ev.Data)
	}
	if _, err := r.Next(); err != io.EOF {
		t.Fatalf("end: %v", err)
	}
}

func TestParserAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under the race detector")
	}
	in := []byte("id: 3-17\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\n\n: keep-alive\n\n")
	p := NewParser(0)
	var ev Event
	feed := func() {
		b := in
		for len(b) > 0 {
			n, _, err := p.Feed(b, &ev)
			if err != nil {
				t.Fatal(err)
			}
			b = b[n:]
		}
	}
	feed() // warm the buffers
	if n := testing.AllocsPerRun(100, feed); n != 0 {
		t.Errorf("Feed allocates %v times per event", n)
	}
}
