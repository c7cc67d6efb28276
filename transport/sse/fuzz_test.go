package sse

import (
	"bytes"
	"strings"
	"testing"
)

// FuzzReader checks that the parser is chunking-independent (whole, split at a fuzzed
// point, split at two points, one byte at a time) and agrees with the naive oracle.
// Seeded from testdata/parse.
func FuzzReader(f *testing.F) {
	for _, in := range parseInputs(f) {
		f.Add(in, uint16(len(in)/2), uint16(len(in)/3))
	}
	f.Fuzz(func(t *testing.T, in []byte, s1, s2 uint16) {
		whole := feedChunks(0, in)
		if whole.err != nil {
			t.Fatalf("unbounded parse failed: %v", whole.err)
		}
		want := whole.String()
		if ref := refParse(in).String(); ref != want {
			t.Fatalf("parser and oracle disagree on %q\nparser:\n%s\noracle:\n%s", in, want, ref)
		}
		if len(in) == 0 {
			return
		}
		i, j := int(s1)%(len(in)+1), int(s2)%(len(in)+1)
		if i > j {
			i, j = j, i
		}
		if got := feedChunks(0, in[:i], in[i:]).String(); got != want {
			t.Fatalf("split at %d of %q:\n%s\nwant:\n%s", i, in, got, want)
		}
		if got := feedChunks(0, in[:i], in[i:j], in[j:]).String(); got != want {
			t.Fatalf("split at %d,%d of %q:\n%s\nwant:\n%s", i, j, in, got, want)
		}
		if len(in) <= 4096 {
			if got := feedChunks(0, bytesOneByOne(in)...).String(); got != want {
				t.Fatalf("one byte at a time of %q:\n%s\nwant:\n%s", in, got, want)
			}
		}
		// A bound never changes the events before the one that exceeds it.
		small := feedChunks(16, in)
		for k, e := range small.events {
			if k >= len(whole.events) || e != whole.events[k] {
				t.Fatalf("bounded parse diverged at event %d", k)
			}
		}
	})
}

// FuzzRoundTrip checks that what AppendEvent writes reads back as written: id and event
// name without the bytes that cannot be represented, data with line ends as LF.
func FuzzRoundTrip(f *testing.F) {
	f.Add("1-1", "message", []byte(`{"jsonrpc":"2.0","id":1,"result":{}}`))
	f.Add("", "", []byte(""))
	f.Add("0-0", "", []byte("\r\n\r"))
	f.Add("a\x00b", "e\rv", []byte(" lead\r\nmid\rend\n"))
	f.Add(" id ", ":", []byte(":not a comment"))
	f.Fuzz(func(t *testing.T, id, event string, data []byte) {
		var out []byte
		out = AppendEvent(out, []byte(id), event, data)
		out = AppendComment(out, event)
		out = AppendEvent(out, nil, "", data) // a second event: the id persists
		o := feedChunks(0, out)
		if o.err != nil {
			t.Fatal(o.err)
		}
		if len(o.events) != 2 {
			t.Fatalf("%d events from %q", len(o.events), out)
		}
		wantID := strings.NewReplacer("\r", "", "\n", "", "\x00", "").Replace(id)
		wantEvent := strings.NewReplacer("\r", "", "\n", "").Replace(event)
		wantData := string(bytes.ReplaceAll(bytes.ReplaceAll(data, []byte("\r\n"), []byte("\n")), []byte("\r"), []byte("\n")))
		first, second := o.events[0], o.events[1]
		if first.ID != wantID || first.HasID != (id != "") || first.Type != wantEvent || first.Data != wantData {
			t.Fatalf("first event %v, want id %q event %q data %q", first, wantID, wantEvent, wantData)
		}
		if second.ID != wantID || second.HasID || second.Type != "" || second.Data != wantData {
			t.Fatalf("second event %v", second)
		}
		if got := feedChunks(0, bytesOneByOne(out)...); got.String() != o.String() {
			t.Fatalf("chunking changed the result")
		}
	})
}

// FuzzParseEventID checks that accepted ids are canonical: formatting gives back the input.
func FuzzParseEventID(f *testing.F) {
	for _, s := range []string{"0-0", "1-2", "4294967295-18446744073709551615", "01-1", "1-", "x"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		id, ok := ParseEventID(b)
		if !ok {
			return
		}
		if got := id.Append(nil); !bytes.Equal(got, b) {
			t.Fatalf("ParseEventID(%q) = %v, which formats as %q", b, id, got)
		}
	})
}
