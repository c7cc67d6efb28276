package policy

import (
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/transport/auth"
)

// clock is a test clock the limiters read.
type clock struct{ ns atomic.Int64 }

func (c *clock) now() int64           { return c.ns.Load() }
func (c *clock) step(d time.Duration) { c.ns.Add(int64(d)) }
func (c *clock) limiter() *Limiter    { return NewLimiter(LimiterOptions{Now: c.now}) }
func limitsEngine(t testing.TB, l *Limiter, limits ...Limit) *Engine {
	t.Helper()
	e, err := New(Config{Limits: limits}, Options{Limiter: l, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestTakeBucket(t *testing.T) {
	var c clock
	e := limitsEngine(t, c.limiter(), Limit{Name: "p", Key: KeyParts{KeyPrincipal}, Rate: 10, Burst: 3})
	in := mustInput(t, call("t", ""))
	for i := range 3 {
		if v := e.Take(alice, in); !v.Allowed {
			t.Fatalf("request %d of the burst refused", i)
		}
	}
	v := e.Take(alice, in)
	if v.Allowed || v.Limit != "p" || v.Key != "alice" || v.RetryAfter != 100*time.Millisecond {
		t.Fatalf("fourth: %+v", v)
	}
	if !e.Take(bob, in).Allowed {
		t.Fatal("another principal has its own bucket")
	}
	c.step(50 * time.Millisecond)
	if v := e.Take(alice, in); v.Allowed || v.RetryAfter != 50*time.Millisecond {
		t.Fatalf("half a token later: %+v", v)
	}
	c.step(50 * time.Millisecond)
	if !e.Take(alice, in).Allowed {
		t.Fatal("a token later: refused")
	}
	// A long pause refills to the burst, no more.
	c.step(time.Hour)
	n := 0
	for e.Take(alice, in).Allowed {
		n++
	}
	if n != 3 {
		t.Fatalf("after an hour %d admitted, burst 3", n)
	}
	if st := e.Stats(); st.LimitedByLimit["p"] != 3 {
		t.Errorf("limited counter: %+v", st.LimitedByLimit)
	}
}

// Several limits: a request takes a token from each that matches, or from none.
func TestTakeSeveralLimits(t *testing.T) {
	var c clock
	e := limitsEngine(t, c.limiter(),
		Limit{Name: "all", Key: KeyParts{KeyPrincipal}, Rate: 100, Burst: 5},
		Limit{Name: "calls", Match: `mcp.method == "tools/call"`, Key: KeyParts{KeyPrincipal, KeyTool}, Rate: 1, Burst: 2},
	)
	callX := mustInput(t, call("x", ""))
	callY := mustInput(t, call("y", ""))
	read := mustInput(t, `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"a:b"}}`)
	for _, want := range []bool{true, true, false, false} {
		if v := e.Take(alice, callX); v.Allowed != want {
			t.Fatalf("call x: %+v, want %v", v, want)
		}
	}
	// The refused calls gave their "all" token back: 3 left of 5.
	if !e.Take(alice, callY).Allowed || !e.Take(alice, read).Allowed || !e.Take(alice, read).Allowed {
		t.Fatal("tokens of refused requests were not given back")
	}
	if v := e.Take(alice, read); v.Allowed || v.Limit != "all" {
		t.Fatalf("all exhausted: %+v", v)
	}
}

func TestLimitKey(t *testing.T) {
	in := mustInput(t, call("t", ""))
	in.Backend = "b"
	s := NewSubject(&auth.Principal{Subject: "s", Issuer: "i"})
	for _, tc := range []struct {
		parts KeyParts
		want  string
	}{
		{nil, ""},
		{KeyParts{KeyPrincipal}, "i s"},
		{KeyParts{KeyTool}, "t"},
		{KeyParts{KeyPrincipal, KeyTool}, "3:i s1:t"},
		{KeyParts{KeyMethod, KeyBackend, KeyPrompt, KeyURI}, "10:tools/call1:b0:0:"},
	} {
		if got := string(appendLimitKey(nil, tc.parts, s, in)); got != tc.want {
			t.Errorf("%v: %q, want %q", tc.parts, got, tc.want)
		}
	}
	// No choice of names makes two combinations one key.
	a := NewSubject(&auth.Principal{Subject: "a:b"})
	b := NewSubject(&auth.Principal{Subject: "a"})
	ina, inb := mustInput(t, call("c", "")), mustInput(t, call("b:c", ""))
	if string(appendLimitKey(nil, KeyParts{KeyPrincipal, KeyTool}, a, ina)) == string(appendLimitKey(nil, KeyParts{KeyPrincipal, KeyTool}, b, inb)) {
		t.Error("composite keys collide")
	}
}

// The key table stays within MaxKeys: idle keys go first, then the least recently used.
func TestLimitEviction(t *testing.T) {
	var c clock
	l := c.limiter()
	e := limitsEngine(t, l, Limit{Name: "k", Key: KeyParts{KeyTool}, Rate: 1, Burst: 1, MaxKeys: 64})
	for i := range 1000 {
		e.Take(carol, mustInput(t, call(fmt.Sprint("t", i), "")))
		if n := l.Len(); n > 64 {
			t.Fatalf("%d keys, bound 64", n)
		}
	}
	// After a refill every key is idle: a sweep empties the table.
	c.step(2 * time.Second)
	l.Sweep()
	if n := l.Len(); n != 0 {
		t.Fatalf("%d keys after the sweep of idle keys", n)
	}
	// In a full shard the idle keys go first: a key that is consuming stays.
	tb := newTable(Limit{Name: "t", Rate: 1, Per: time.Second, Burst: 1, MaxKeys: 2 * numShards})
	sameShard := func(n int) []string { // n keys of the shard of "hot"
		var keys []string
		for i := 0; len(keys) < n; i++ {
			if k := fmt.Sprint("k", i); tb.shard(k) == tb.shard("hot") {
				keys = append(keys, k)
			}
		}
		return keys
	}
	keys := sameShard(2)
	tb.take([]byte(keys[0]), c.now())
	c.step(2 * time.Second) // keys[0] is idle again
	tb.take([]byte("hot"), c.now())
	tb.take([]byte(keys[1]), c.now()) // the shard is full: keys[0] goes, not hot
	sh := tb.shard("hot")
	if _, ok := sh.m["hot"]; !ok || len(sh.m) != 2 {
		t.Fatalf("shard after eviction: %v", sh.m)
	}
	if b, _ := tb.take([]byte("hot"), c.now()); b != nil {
		t.Fatal("the consuming key was evicted: it got a fresh burst")
	}
}

// A reload keeps the buckets of the limits that did not change, and resets the others.
func TestLimiterReload(t *testing.T) {
	var c clock
	l := c.limiter()
	lim := Limit{Name: "p", Key: KeyParts{KeyPrincipal}, Rate: 1, Burst: 1}
	e1 := limitsEngine(t, l, lim)
	in := mustInput(t, call("t", ""))
	if !e1.Take(alice, in).Allowed || e1.Take(alice, in).Allowed {
		t.Fatal("burst 1")
	}
	e2 := limitsEngine(t, l, lim)
	if e2.Take(alice, in).Allowed {
		t.Fatal("reload with the same limit refilled the bucket")
	}
	lim.Burst = 2
	e3 := limitsEngine(t, l, lim)
	if !e3.Take(alice, in).Allowed {
		t.Fatal("a changed limit kept the old bucket")
	}
	// A reload that removes the limit: the engine before it, still deciding some
	// requests, finds no table and admits.
	limitsEngine(t, l, Limit{Name: "other", Rate: 1})
	if !e3.Take(alice, in).Allowed {
		t.Fatal("removed limit")
	}
}

// A match that cannot be evaluated counts the request (fail closed).
func TestTakeMatchError(t *testing.T) {
	var c clock
	e := limitsEngine(t, c.limiter(), Limit{Name: "m", Match: `mcp.arguments.n > 1`, Rate: 1, Burst: 1})
	in := mustInput(t, call("t", `{}`))
	if !e.Take(alice, in).Allowed || e.Take(alice, mustInput(t, call("t", `{}`))).Allowed {
		t.Fatal("a failing match did not count")
	}
	if !e.Take(alice, mustInput(t, call("t", `{"n":0}`))).Allowed {
		t.Fatal("a request the match excludes was limited")
	}
}

// Without limits, Take admits everything and needs no limiter.
func TestTakeNoLimits(t *testing.T) {
	e := mustEngine(t, Config{})
	if e.Limiter() != nil || !e.Take(alice, mustInput(t, call("t", ""))).Allowed {
		t.Fatal("no limits")
	}
}

// A bucket deep in debt hints at most maxRetryAfter.
func TestRetryAfterCap(t *testing.T) {
	var c clock
	tb := newTable(Limit{Name: "t", Rate: 1, Per: time.Hour, Burst: 1, MaxKeys: 16})
	tb.debit([]byte("k"), 1<<40, c.now())
	if b, wait := tb.take([]byte("k"), c.now()); b != nil || wait != maxRetryAfter {
		t.Fatalf("admitted %v, wait %v", b != nil, wait)
	}
}
