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

// feed records n calls of k that took d each.
func feed(ct *CallTimes, k callKind, n int, d time.Duration) {
	for range n {
		ct.record(k, d)
	}
}

// A kind is short only once seen shortWarmup times, typically within the bound and at
// worst within slowFactor times it; one slow call takes it off for a while, the longer
// the slower it was; its typical time is what it counts for requests behind it.
func TestCallTimesPredict(t *testing.T) {
	short := func(ct *CallTimes, k callKind) bool {
		_, ok := ct.predict(k, testBound)
		return ok
	}
	ct := NewCallTimes()
	k := kindOfMsg(t, msgCall(1, "echo", "a"))
	if short(ct, k) {
		t.Fatal("a kind never seen is short")
	}
	feed(ct, k, shortWarmup-1, 50*time.Microsecond)
	if short(ct, k) {
		t.Fatalf("short after %d calls, before the warm-up of %d", shortWarmup-1, shortWarmup)
	}
	feed(ct, k, 1, 50*time.Microsecond)
	if est, ok := ct.predict(k, testBound); !ok || est != 50 {
		t.Fatalf("after the warm-up: estimate %dµs, short %v; want 50µs, true", est, ok)
	}
	// Queueing under load: calls of 0.5-2 ms, a few at 4 ms, leave it short, and its
	// typical time near the shortest.
	for i := range 200 {
		d := time.Duration(500+i%4*500) * time.Microsecond
		if i%50 == 49 {
			d = 4 * time.Millisecond
		}
		ct.record(k, d)
		if i%4 == 0 {
			ct.record(k, 60*time.Microsecond)
		}
	}
	if est, ok := ct.predict(k, testBound); !ok || est > 500 {
		t.Fatalf("under load: estimate %dµs, short %v; want at most 500µs, true", est, ok)
	}
	// A slow call takes the kind off; fast calls bring it back, later after a slower one.
	back := func(slow time.Duration) int {
		feed(ct, k, 1, slow)
		for n := 1; n <= 200; n++ {
			if short(ct, k) {
				return n - 1
			}
			ct.record(k, 50*time.Microsecond)
		}
		t.Fatalf("still not short 200 fast calls after one of %v", slow)
		return 0
	}
	after10ms, after5s := back(10*time.Millisecond), back(5*time.Second)
	if after10ms < 1 || after5s <= after10ms {
		t.Fatalf("fast calls before short again: %d after a 10ms call, %d after a 5s one", after10ms, after5s)
	}
	if back(slowSample) < after5s {
		t.Fatal("an event stream kept the kind off for less than a 5s call")
	}
	// A kind whose calls are typically over the bound is never short.
	slow := kindOfMsg(t, msgCall(1, "query", "a"))
	feed(ct, slow, 100, 2*time.Millisecond)
	if short(ct, slow) {
		t.Fatal("a kind of 2ms calls is short against a 1ms bound")
	}
}

// The table holds callSlots words whatever the kinds: a kind pushed out by others is
// unknown again (not short) until seen shortWarmup times anew.
func TestCallTimesBounded(t *testing.T) {
	ct := NewCallTimes()
	k := kindOfMsg(t, msgCall(1, "echo", "a"))
	feed(ct, k, shortWarmup, 50*time.Microsecond)
	for i := range 20 * callSlots {
		feed(ct, kindOfMsg(t, msgCall(1, fmt.Sprint("tool", i), "a")), shortWarmup, 50*time.Microsecond)
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
		ct.record(k, 50*time.Microsecond)
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
			ct.record(k, 50*time.Microsecond)
		}
	})
}
