package sse

import (
	"bufio"
	"io"
	"sync"
	"testing"
)

// TestStatsQueuedGauge follows Stats.Queued, the backlog gauge shared by streams,
// through every way a backlog changes: publish to an attached consumer, the pump taking
// it, a cut-off, a replacement by Attach, and Consumer.Close.
func TestStatsQueuedGauge(t *testing.T) {
	st := new(Stats)
	cfg := StreamConfig{QueueBytes: 1024, RingBytes: 64 << 10, Stats: st}
	a, b := NewStream(1, cfg), NewStream(2, cfg)

	// Nothing attached: events go to the ring only, no backlog.
	publishN(t, a, 1, 3)
	if q := st.Queued.Load(); q != 0 {
		t.Fatalf("queued %d with no consumer", q)
	}

	// Attached consumers accumulate backlog, summed over the streams.
	ca := attach(t, a)
	cb := attach(t, b)
	var want int64
	for i := 0; i < 3; i++ {
		want += publishBytes(t, a, i)
		want += publishBytes(t, b, i)
	}
	if q := st.Queued.Load(); q != want {
		t.Fatalf("queued %d, want %d", q, want)
	}

	// b's consumer closes without pumping: its share goes away.
	bShare := b.pending
	cb.Close()
	if q := st.Queued.Load(); q != want-int64(bShare) {
		t.Fatalf("after Close: queued %d, want %d", q, want-int64(bShare))
	}

	// a's pump drains the backlog, stream closed so the pump ends.
	a.Close(0)
	if _, err := pumpAll(t, ca, PumpOptions{}); err != nil {
		t.Fatal(err)
	}
	if q := st.Queued.Load(); q != 0 {
		t.Fatalf("after draining: queued %d", q)
	}

	// A consumer that never reads is cut off past QueueBytes: its backlog is dropped.
	c := NewStream(3, cfg)
	if _, err := c.Attach(0); err != nil {
		t.Fatal(err)
	}
	for n := 0; st.CutOffs.Load() == 0; n++ {
		if n > 1000 {
			t.Fatal("never cut off")
		}
		publishBytes(t, c, n)
	}
	// The event that caused the cut-off went to the ring only.
	if q := st.Queued.Load(); q != 0 {
		t.Fatalf("after cut-off: queued %d", q)
	}

	// Attach replacing a consumer starts from an empty backlog.
	d := NewStream(4, cfg)
	d.Attach(0)
	publishBytes(t, d, 1)
	d.Attach(0)
	if q := st.Queued.Load(); q != 0 {
		t.Fatalf("after re-attach: queued %d", q)
	}
}

// TestStatsQueuedConcurrent publishes and pumps from several goroutines and checks that
// the gauge returns to zero once everything is drained (run with -race).
func TestStatsQueuedConcurrent(t *testing.T) {
	st := new(Stats)
	cfg := StreamConfig{Stats: st}
	var wg sync.WaitGroup
	var pumps []chan error
	for i := 0; i < 4; i++ {
		s := NewStream(uint32(i), cfg)
		c := attach(t, s)
		done := make(chan error, 1)
		pumps = append(pumps, done)
		go func() { done <- c.Pump(bufio.NewWriter(io.Discard), PumpOptions{KeepAlive: -1}) }()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; n < 200; n++ {
				s.Publish("", payload(n))
			}
			s.Close(0)
		}()
	}
	wg.Wait()
	for _, done := range pumps {
		if err := within(t, done, "pump"); err != nil {
			t.Error(err)
		}
	}
	if q := st.Queued.Load(); q != 0 {
		t.Errorf("queued %d after drain", q)
	}
}

// publishBytes publishes one event and returns the bytes it adds to an attached
// consumer's backlog (its encoded frame).
func publishBytes(t *testing.T, s *Stream, n int) int64 {
	t.Helper()
	s.mu.Lock()
	before := s.pending
	attached := s.cons != nil
	s.mu.Unlock()
	if _, err := s.Publish("", payload(n)); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !attached || s.cons == nil {
		return 0
	}
	return int64(s.pending - before)
}
