package upstream

import (
	"fmt"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/codec"
)

// testBound is the short bound the record's tests predict with, in µs.
const testBound = int64(defaultShortBound / time.Microsecond)

// kindOfMsg scans msg and returns its kind.
func kindOfMsg(t testing.TB, msg string) callKind {
	t.Helper()
	var m codec.Message
	if err := codec.Scan([]byte(msg), &m); err != nil {
		t.Fatalf("scan %s: %v", msg, err)
	}
	return kindOf(&m)
}

// A kind is the method, with the name or URI of the methods routed by it: calls of one
// tool are one kind whatever their arguments or id, other tools and methods are others.
func TestKindOf(t *testing.T) {
	echo := kindOfMsg(t, msgCall(1, "echo", "a"))
	for _, c := range []struct {
		msg  string
		same bool
	}{
		{msgCall(2, "echo", "another text"), true},
		{msgCall(3, "sleep", "a"), false},
		{`{"jsonrpc":"2.0","id":4,"method":"prompts/get","params":{"name":"echo"}}`, false},
		{`{"jsonrpc":"2.0","id":5,"method":"tools/list","params":{"name":"ignored"}}`, false},
	} {
		if got := kindOfMsg(t, c.msg) == echo; got != c.same {
			t.Errorf("%s: same kind as tools/call echo %v, want %v", c.msg, got, c.same)
		}
	}
	read := func(uri string) callKind {
		return kindOfMsg(t, `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"`+uri+`"}}`)
	}
	if read("file:///a") == read("file:///b") || read("file:///a") != read("file:///a") {
		t.Error("resources/read: the URI is not the kind")
	}
	list := `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
	if kindOfMsg(t, list) != kindOfMsg(t, `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"name":"x"}}`) {
		t.Error("tools/list: a name made another kind of a method not routed by name")
	}
	if kindOf(nil) != 0 || kindOfMsg(t, list) == 0 {
		t.Error("a batch has a kind, or a message has none")
	}
}

// testSlow is the slow limit of the record's tests (slowFactor times the bound).
const testSlow = slowFactor * defaultShortBound

// feed records n calls of k that took d each, slow when over testSlow.
func feed(ct *CallTimes, k callKind, n int, d time.Duration) {
	for range n {
		ct.record(k, d, d > testSlow)
	}
}

// shortFor reports whether k is short against testBound.
func shortFor(ct *CallTimes, k callKind) bool {
	_, ok := ct.predict(k, testBound)
	return ok
}

// A kind is short only after shortClean calls in a row that were not slow, typically
// within the bound; its typical time is what it counts for requests behind it.
func TestCallTimesPredict(t *testing.T) {
	ct := NewCallTimes()
	k := kindOfMsg(t, msgCall(1, "echo", "a"))
	if shortFor(ct, k) {
		t.Fatal("a kind never seen is short")
	}
	feed(ct, k, shortClean-1, 50*time.Microsecond)
	if shortFor(ct, k) {
		t.Fatalf("short after %d clean calls, fewer than %d", shortClean-1, shortClean)
	}
	feed(ct, k, 1, 50*time.Microsecond)
	if est, ok := ct.predict(k, testBound); !ok || est != 50 {
		t.Fatalf("after %d clean calls: estimate %dµs, short %v; want 50µs, true", shortClean, est, ok)
	}
	// Queueing under load: calls of 0.5-2 ms, a few at 4 ms (under the slow limit),
	// leave it short, and its typical time near the shortest.
	for i := range 2 * shortClean {
		d := time.Duration(500+i%4*500) * time.Microsecond
		if i%50 == 49 {
			d = 4 * time.Millisecond
		}
		feed(ct, k, 1, d)
		if i%4 == 0 {
			feed(ct, k, 1, 60*time.Microsecond)
		}
	}
	if est, ok := ct.predict(k, testBound); !ok || est > 500 {
		t.Fatalf("under load: estimate %dµs, short %v; want at most 500µs, true", est, ok)
	}
	// A kind whose calls are typically over the bound is never short.
	slow := kindOfMsg(t, msgCall(1, "query", "a"))
	feed(ct, slow, 2*shortClean, 2*time.Millisecond)
	if shortFor(ct, slow) {
		t.Fatal("a kind of 2ms calls is short against a 1ms bound")
	}
}

// One slow call (over the limit, or booked slow without a time: an event stream, a
// stall seen by a pick) takes a short kind off until shortClean clean calls followed
// it, and leaves its typical time as it was; a kind that stalls one call in 50 or in
// 200 therefore stays off, one that stalls one in 10,000 is mostly short.
func TestCallTimesSlowCall(t *testing.T) {
	ct := NewCallTimes()
	k := toolKind("echo")
	for _, slow := range []func(){
		func() { feed(ct, k, 1, 50*time.Millisecond) },
		func() { ct.record(k, noTime, true) },
	} {
		feed(ct, k, shortClean, 50*time.Microsecond)
		slow()
		if shortFor(ct, k) {
			t.Fatal("short right after a slow call")
		}
		feed(ct, k, shortClean-1, 50*time.Microsecond)
		if shortFor(ct, k) {
			t.Fatalf("short after %d clean calls since a slow one", shortClean-1)
		}
		feed(ct, k, 1, 50*time.Microsecond)
		if est, ok := ct.predict(k, testBound); !ok || est != 50 {
			t.Fatalf("%d calls after a slow one: estimate %dµs, short %v; want 50µs, true", shortClean, est, ok)
		}
	}
	for _, c := range []struct {
		every       int
		atMost      float64 // of the calls predicted short
		atLeast     float64
		description string
	}{
		{50, 0, 0, "1 in 50"},
		{200, 0.01, 0, "1 in 200"},
		{10000, 1, 0.8, "1 in 10,000"},
	} {
		ct := NewCallTimes()
		short := 0
		const n = 200000
		for i := 1; i <= n; i++ {
			if shortFor(ct, k) {
				short++
			}
			d := 50 * time.Microsecond
			if i%c.every == 0 {
				d = 50 * time.Millisecond
			}
			feed(ct, k, 1, d)
		}
		if f := float64(short) / n; f > c.atMost || f < c.atLeast {
			t.Errorf("a kind that stalls %s: %.3f of its calls predicted short, want %.2f-%.2f", c.description, f, c.atLeast, c.atMost)
		}
	}
}

// The count of clean calls saturates: a kind seen clean for ever stays short, and one
// slow call still takes it off.
func TestCallTimesSaturates(t *testing.T) {
	ct := NewCallTimes()
	k := toolKind("echo")
	feed(ct, k, maxFig+100, 50*time.Microsecond)
	s, _ := ct.slot(k)
	if _, st := unpack(s.Load()); st.clean != maxFig || st.typical != 50 {
		t.Fatalf("after %d clean calls: clean %d, typical %dµs; want %d, 50µs", maxFig+100, st.clean, st.typical, maxFig)
	}
	if !shortFor(ct, k) {
		t.Fatal("not short after the count saturated")
	}
	feed(ct, k, 1, 50*time.Millisecond)
	if shortFor(ct, k) {
		t.Fatal("short after a slow call that followed a saturated count")
	}
}

// The table holds callSlots words whatever the kinds: a kind pushed out by others is
// unknown again (not short) until seen clean shortClean times anew.
func TestCallTimesBounded(t *testing.T) {
	ct := NewCallTimes()
	k := kindOfMsg(t, msgCall(1, "echo", "a"))
	feed(ct, k, shortClean, 50*time.Microsecond)
	for i := range 20 * callSlots {
		feed(ct, kindOfMsg(t, msgCall(1, fmt.Sprint("tool", i), "a")), shortClean, 50*time.Microsecond)
	}
	known := 0
	for i := range 20 * callSlots {
		if _, ok := ct.predict(kindOfMsg(t, msgCall(1, fmt.Sprint("tool", i), "a")), testBound); ok {
			known++
		}
	}
	if known > callSlots {
		t.Fatalf("%d kinds known, more than the table's %d slots", known, callSlots)
	}
	if _, ok := ct.predict(k, testBound); ok {
		t.Fatal("a kind pushed out of its slot is still short")
	}
}

// Taking the kind of a call, predicting it and recording it allocate nothing.
func TestCallTimesNoAllocs(t *testing.T) {
	var m codec.Message
	if err := codec.Scan([]byte(msgCall(1, "echo", "a")), &m); err != nil {
		t.Fatal(err)
	}
	ct := NewCallTimes()
	if n := testing.AllocsPerRun(100, func() {
		k := kindOf(&m)
		ct.predict(k, testBound)
		ct.record(k, 50*time.Microsecond, false)
	}); n != 0 {
		t.Fatalf("%v allocations per call", n)
	}
}

// BenchmarkCallTimes: what PipelineShort adds to a call, from every core at once on
// one kind (the hot slot of a benchmark's echo).
func BenchmarkCallTimes(b *testing.B) {
	var m codec.Message
	if err := codec.Scan([]byte(msgCall(1, "echo", "a")), &m); err != nil {
		b.Fatal(err)
	}
	ct := NewCallTimes()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			k := kindOf(&m)
			ct.predict(k, testBound)
			ct.record(k, 50*time.Microsecond, false)
		}
	})
}
