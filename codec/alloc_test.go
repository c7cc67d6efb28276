package codec

import (
	"bytes"
	"testing"

	"github.com/mcprouter/mcprouter/internal/testio"
)

// The hot path must not allocate: these guards fail the build of any change that
// makes it. The race runtime allocates on its own, so they skip under -race.

func skipUnderRace(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under -race")
	}
}

func TestAllocsScan(t *testing.T) {
	skipUnderRace(t)
	var m Message
	for _, path := range corpusFiles(t) {
		in := readFile(t, path)
		if Scan(in, &m) != nil {
			continue // errors allocate their *Error, by design
		}
		if n := testing.AllocsPerRun(50, func() { _ = Scan(in, &m) }); n != 0 {
			t.Errorf("%s: %v allocs per Scan", path, n)
		}
	}
}

func TestAllocsSplitBatch(t *testing.T) {
	skipUnderRace(t)
	in := readTestdata(t, "bench/batch100.json")
	elems := make([][]byte, 0, 128)
	var m Message
	if n := testing.AllocsPerRun(50, func() {
		elems, _ = SplitBatch(in, elems[:0])
		for _, e := range elems {
			_ = Scan(e, &m)
		}
	}); n != 0 {
		t.Errorf("%v allocs per split and scan", n)
	}
}

func TestAllocsRewrites(t *testing.T) {
	skipUnderRace(t)
	msg, m := mustScan(t, string(readTestdata(t, "bench/call199.json")))
	list := []byte(toolsListResult(20))
	prefixed, err := AppendPrefixListNames(nil, list, "tools", "name", "b1__")
	if err != nil {
		t.Fatal(err)
	}
	dst := make([]byte, 0, 4*len(list))
	sp := make([]Splice, 3)
	five, six, pre := []byte(`5`), []byte(`6`), []byte(`p_`)
	for name, f := range map[string]func(){
		"ReplaceID":            func() { dst = AppendReplaceID(dst[:0], msg, m, []byte(`"x:1"`)) },
		"ReplaceProgressToken": func() { dst = AppendReplaceProgressToken(dst[:0], msg, m, []byte(`5`)) },
		"Splices": func() {
			sp[0], sp[1], sp[2] = Splice{Old: m.ProgressToken, New: five}, Splice{Old: m.ID, New: six}, Splice{Old: m.Name[:0], New: pre}
			dst = AppendSplices(dst[:0], msg, sp)
		},
		"PrefixListNames": func() { dst, _ = AppendPrefixListNames(dst[:0], list, "tools", "name", "b1__") },
		"StripListNames":  func() { dst, _ = AppendStripListNames(dst[:0], prefixed, "tools", "name", "b1__") },
		"Result":          func() { dst = AppendResult(dst[:0], m.ID, list) },
		"Error":           func() { dst = AppendError(dst[:0], m.ID, CodeInvalidParams, "Invalid params: \"name\"", nil) },
		"Request":         func() { dst = AppendRequest(dst[:0], m.ID, "tools/call", m.Params) },
		"Notification":    func() { dst = AppendNotification(dst[:0], "notifications/cancelled", []byte(`{"requestId":1}`)) },
		"Unquote":         func() { dst, _ = Unquote(dst[:0], []byte(`caf\u00e9 \"x\"`)) },
	} {
		if n := testing.AllocsPerRun(50, f); n != 0 {
			t.Errorf("%s: %v allocs", name, n)
		}
	}
}

// TestAllocsDecoder checks that a warmed-up Decoder yields frames without allocating.
func TestAllocsDecoder(t *testing.T) {
	skipUnderRace(t)
	msg := readTestdata(t, "bench/call199.json")
	stream := bytes.Repeat(append(msg, '\n'), 2000)
	r := testio.NewChunkReader(stream, 4096)
	d := NewDecoder(r, 1<<16)
	if _, err := d.Next(); err != nil { // warm up: the buffer is allocated once
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(500, func() {
		if _, err := d.Next(); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("%v allocs per frame", n)
	}
}
