package policy

import (
	"log/slog"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/mcprouter/mcprouter/internal/testwait"
)

// waitLimit bounds every wait for NATS deliveries.
const waitLimit = 10 * time.Second

func startNATS(t testing.TB) *server.Server {
	t.Helper()
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(waitLimit) {
		t.Fatal("NATS server not ready")
	}
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	return s
}

func connect(t testing.TB, s *server.Server) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// instance is one router's limits in the cluster test.
type instance struct {
	e    *Engine
	sync *Sync
}

// Three instances on a real NATS server keep one principal's aggregate admitted rate
// within the bound documented on Sync: r·T + b + (N−1)·(b + r·d) in any window of
// length T. The instances share one simulated clock, so that d is exactly the sync
// interval (each publish is delivered before the clock moves on) and the check is
// exact rather than timing-dependent.
func TestSyncClusterBound(t *testing.T) {
	const (
		n        = 3
		rate     = 100.0 // per second
		burst    = 20
		interval = 100 * time.Millisecond
		step     = 5 * time.Millisecond
		attempts = 3 // per instance per step: 1800/s offered in all, 18x the rate
		duration = 3 * time.Second
	)
	ns := startNATS(t)
	var c clock
	lim := Limit{Name: "p", Key: KeyParts{KeyPrincipal}, Rate: rate, Burst: burst}
	run := func(shared bool) []int64 {
		var insts []instance
		for range n {
			l := c.limiter()
			in := instance{e: limitsEngine(t, l, lim)}
			if shared {
				var err error
				in.sync, err = StartSync(l, connect(t, ns), SyncOptions{Subject: "test.policy.limits", Logger: slog.New(slog.DiscardHandler)})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(in.sync.Close)
			}
			insts = append(insts, in)
		}
		req := mustInput(t, call("t", ""))
		var admitted []int64 // clock of each admitted request, all instances
		start := c.now()
		for c.now()-start < int64(duration) {
			for _, in := range insts {
				for range attempts {
					if in.e.Take(alice, req).Allowed {
						admitted = append(admitted, c.now()-start)
					}
				}
			}
			c.step(step)
			if shared && (c.now()-start)%int64(interval) == 0 {
				flushAll(t, insts)
			}
		}
		return admitted
	}

	admitted := run(true)
	bound := func(T time.Duration) float64 {
		return rate*T.Seconds() + burst + (n-1)*(burst+rate*interval.Seconds())
	}
	for _, T := range []time.Duration{step, interval, 500 * time.Millisecond, time.Second, duration} {
		worst, at := maxInWindow(admitted, T, step)
		t.Logf("window %v: at most %d admitted (from %v), bound %.0f, one bucket %.0f", T, worst, time.Duration(at), bound(T), rate*T.Seconds()+burst)
		if float64(worst) > bound(T) {
			t.Errorf("window %v from %v: %d admitted, bound %.0f", T, time.Duration(at), worst, bound(T))
		}
	}
	// After the start (every instance begins with a full burst), the steady state.
	var steady []int64
	for _, ts := range admitted {
		if ts >= int64(time.Second) {
			steady = append(steady, ts)
		}
	}
	for _, T := range []time.Duration{interval, time.Second} {
		worst, _ := maxInWindow(steady, T, step)
		t.Logf("steady state, window %v: at most %d admitted, one bucket %.0f", T, worst, rate*T.Seconds()+burst)
	}
	// The limit is shared, not starved: over the run the cluster admits about r·T.
	if total := float64(len(admitted)); total < rate*duration.Seconds()*0.9 {
		t.Errorf("%.0f admitted in %v at %v/s", total, duration, rate)
	}

	// Without sharing, each instance admits the whole rate: the bound has teeth.
	alone := run(false)
	if worst, _ := maxInWindow(alone, time.Second, step); float64(worst) <= bound(time.Second) {
		t.Errorf("unshared instances stayed within the shared bound (%d): the test shows nothing", worst)
	}
}

// flushAll publishes every instance's consumption and waits until each instance has
// applied every other's message.
func flushAll(t *testing.T, insts []instance) {
	t.Helper()
	// The baselines come first: a message may be applied as soon as it is published.
	want := make([]uint64, len(insts))
	published := make([]uint64, len(insts))
	for i, in := range insts {
		want[i] = in.sync.Applied.Load()
		published[i] = in.sync.Published.Load()
	}
	for i, in := range insts {
		if err := in.sync.Flush(); err != nil {
			t.Fatal(err)
		}
		published[i] = in.sync.Published.Load() - published[i]
	}
	for i := range insts {
		for j := range insts {
			if j != i {
				want[i] += published[j]
			}
		}
	}
	testwait.For(t, "consumption to reach every instance", waitLimit, func() bool {
		for i, in := range insts {
			if in.sync.Applied.Load() < want[i] {
				return false
			}
		}
		return true
	})
}

// maxInWindow returns the most timestamps in any window (s, s+T], s a multiple of step.
func maxInWindow(ts []int64, T, step time.Duration) (int, int64) {
	sort.Slice(ts, func(i, j int) bool { return ts[i] < ts[j] })
	best, at := 0, int64(0)
	if len(ts) == 0 {
		return 0, 0
	}
	for s := ts[0] - int64(step); s <= ts[len(ts)-1]; s += int64(step) {
		lo := sort.Search(len(ts), func(i int) bool { return ts[i] > s })
		hi := sort.Search(len(ts), func(i int) bool { return ts[i] > s+int64(T) })
		if hi-lo > best {
			best, at = hi-lo, s
		}
	}
	return best, at
}

// With its own ticker, Sync carries one instance's consumption to another.
func TestSyncTicker(t *testing.T) {
	ns := startNATS(t)
	lim := Limit{Name: "p", Key: KeyParts{KeyPrincipal}, Rate: 1, Per: time.Hour, Burst: 5}
	var engines []*Engine
	for range 2 {
		l := NewLimiter(LimiterOptions{})
		engines = append(engines, limitsEngine(t, l, lim))
		s, err := StartSync(l, connect(t, ns), SyncOptions{Subject: "test.ticker", Interval: 5 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
	}
	req := mustInput(t, call("t", ""))
	for range 5 {
		if !engines[0].Take(alice, req).Allowed {
			t.Fatal("burst refused")
		}
	}
	// The other instance learns of the five and refuses alice from then on.
	testwait.For(t, "the other instance to refuse", waitLimit, func() bool {
		tb := engines[1].Limiter().table("p")
		sh := tb.shard("alice")
		sh.mu.Lock()
		defer sh.mu.Unlock()
		b := sh.m["alice"]
		return b != nil && b.tokens < 1
	})
	if v := engines[1].Take(alice, req); v.Allowed || v.RetryAfter <= 0 {
		t.Fatalf("second instance: %+v", v)
	}
	if !engines[1].Take(bob, req).Allowed {
		t.Fatal("bob refused")
	}
}

// Malformed messages are counted and change nothing; limits an instance does not know
// are skipped.
func TestSyncMalformed(t *testing.T) {
	ns := startNATS(t)
	var c clock
	l := c.limiter()
	e := limitsEngine(t, l, Limit{Name: "p", Key: KeyParts{KeyPrincipal}, Rate: 1, Burst: 1})
	s, err := StartSync(l, connect(t, ns), SyncOptions{Subject: "test.bad", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	pub := connect(t, ns)
	other := []byte{1, 9, 9, 9, 9, 9, 9, 9, 9}
	msgs := [][]byte{
		nil, {2, 0, 0, 0, 0, 0, 0, 0, 0}, {1, 2, 3},
		append(append([]byte(nil), other...), 5, 'p'),               // truncated name
		append(append([]byte(nil), other...), 1, 'q', 1, 1, 'x', 7), // a limit this instance does not know
		append(append([]byte(nil), other...), 1, 'p', 0xff),         // truncated count
	}
	for _, m := range msgs {
		if err := pub.Publish("test.bad", m); err != nil {
			t.Fatal(err)
		}
	}
	testwait.For(t, "the messages", waitLimit, func() bool { return s.Malformed.Load()+s.Applied.Load() >= uint64(len(msgs)) })
	if got := s.Malformed.Load(); got != 5 {
		t.Errorf("%d malformed, want 5", got)
	}
	if !e.Take(alice, mustInput(t, call("t", ""))).Allowed {
		t.Error("a malformed message debited a bucket")
	}
}

// applyConsumption never panics or loops on any input.
func FuzzApplyConsumption(f *testing.F) {
	f.Add([]byte{1, 'p', 1, 5, 'a', 'l', 'i', 'c', 'e', 3})
	f.Add([]byte{1, 'p', 0xff, 0xff, 0xff, 0xff, 0x0f})
	var c clock
	l := c.limiter()
	limitsEngine(f, l, Limit{Name: "p", Key: KeyParts{KeyPrincipal}, Rate: 1, Burst: 1, MaxKeys: 64})
	f.Fuzz(func(t *testing.T, b []byte) {
		_ = applyConsumption(l, b)
		if n := l.Len(); n > 64 {
			t.Fatalf("%d keys", n)
		}
	})
}

// Every admitted request is published exactly once, with Takes and Flushes running
// at the same time (run with -race).
func TestSyncCountsEveryRequest(t *testing.T) {
	ns := startNATS(t)
	lim := Limit{Name: "p", Key: KeyParts{KeyPrincipal}, Rate: 1, Per: time.Hour, Burst: 1 << 30}
	var c clock
	sender, receiver := c.limiter(), c.limiter()
	e := limitsEngine(t, sender, lim)
	limitsEngine(t, receiver, lim)
	s, err := StartSync(sender, connect(t, ns), SyncOptions{Subject: "test.count", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	r, err := StartSync(receiver, connect(t, ns), SyncOptions{Subject: "test.count", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)

	const workers, each = 4, 2000
	done := make(chan struct{})
	go func() {
		defer close(done)
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				sub := []*Subject{alice, bob}[w%2]
				in := mustInput(t, call("t", ""))
				for range each {
					if !e.Take(sub, in).Allowed {
						t.Error("refused")
						return
					}
				}
			})
		}
		wg.Wait()
	}()
	for flushing := true; flushing; {
		select {
		case <-done:
			flushing = false
		default:
		}
		if err := s.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	s.Close() // the last publish
	debt := func(key string) float64 {
		tb := receiver.table("p")
		sh := tb.shard(key)
		sh.mu.Lock()
		defer sh.mu.Unlock()
		if b := sh.m[key]; b != nil {
			return tb.burst - b.tokens
		}
		return 0
	}
	testwait.For(t, "every request to be counted", waitLimit, func() bool { return debt("alice")+debt(bob.ID()) >= workers*each })
	if a, b := debt("alice"), debt(bob.ID()); a != workers/2*each || b != workers/2*each {
		t.Fatalf("received %v and %v, sent %d each", a, b, workers/2*each)
	}
}

// TestSyncCloseConcurrent: Close called from several goroutines at once closes once
// (closing the stop channel twice would panic) and every call returns.
func TestSyncCloseConcurrent(t *testing.T) {
	ns := startNATS(t)
	s, err := StartSync(NewLimiter(LimiterOptions{}), connect(t, ns), SyncOptions{Subject: "test.close", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(s.Close)
	}
	wg.Wait()
	s.Close()
}
