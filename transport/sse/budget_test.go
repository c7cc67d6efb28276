package sse

import (
	"bufio"
	"bytes"
	"errors"
	"testing"

	"github.com/mcprouter/mcprouter/transport/budget"
)

// TestBudgetNewestCounts: every kept event is reserved from the session's account, the
// newest included: an event larger than the share is refused (no longer kept whatever
// its size), and events beyond the share evict the stream's oldest.
func TestBudgetNewestCounts(t *testing.T) {
	b := budget.New(1<<30, 64<<10)
	acct := b.Account()
	s := NewStream(1, StreamConfig{Account: acct, RingBytes: 1 << 20})
	if _, err := s.Publish("", bytes.Repeat([]byte("x"), 100<<10)); !errors.Is(err, ErrOverBudget) {
		t.Fatalf("event over the share: %v, want ErrOverBudget", err)
	}
	if acct.Used() != 0 || s.Last().Seq != 0 {
		t.Fatalf("refused event kept: used %d, last %d", acct.Used(), s.Last().Seq)
	}
	ev := bytes.Repeat([]byte("y"), 10<<10)
	for i := 0; i < 20; i++ {
		if _, err := s.Publish("", ev); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if acct.Used() > b.Share() {
			t.Fatalf("event %d: account %d over its share %d", i, acct.Used(), b.Share())
		}
	}
	if n := s.Stats().Evictions.Load(); n == 0 {
		t.Errorf("no eviction with 200 KiB published in a 64 KiB share")
	}
	if acct.Used() != b.Used() || acct.Used() == 0 {
		t.Errorf("account %d, budget %d: want equal and non-zero", acct.Used(), b.Used())
	}
	// What is kept resumes exactly: the newest events.
	if _, err := s.Resume(s.Last().Seq - 1); err != nil {
		t.Errorf("resuming the newest: %v", err)
	}
}

// TestBudgetLiveConsumerCut: a consumer that does not read while its session's share
// fills is cut off as too slow (its events evicted, which the budget forces), never
// blocks Publish; the stream's memory stays within the share.
func TestBudgetLiveConsumerCut(t *testing.T) {
	b := budget.New(1<<30, 32<<10)
	acct := b.Account()
	s := NewStream(2, StreamConfig{Account: acct})
	c := attach(t, s)
	g := newGateWriter()
	errc := make(chan error, 1)
	go func() { errc <- c.Pump(bufio.NewWriterSize(g, 16), PumpOptions{}) }()
	ev := bytes.Repeat([]byte("z"), 4<<10)
	s.Publish("", ev)
	within(t, g.entered, "the pump to block")
	for i := 0; i < 20; i++ {
		if _, err := s.Publish("", ev); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
	}
	if acct.Used() > b.Share() {
		t.Errorf("account %d over its share %d", acct.Used(), b.Share())
	}
	close(g.release)
	if err := within(t, errc, "Pump"); err != ErrSlowConsumer {
		t.Fatalf("Pump: %v, want ErrSlowConsumer", err)
	}
}

// TestDropAndTrim: Drop empties a finished stream nobody reads and gives its budget
// back; Trim gives back only what a client has already read.
func TestDropAndTrim(t *testing.T) {
	b := budget.New(1<<30, 1<<20)
	acct := b.Account()
	s := NewStream(3, StreamConfig{Account: acct})
	publishN(t, s, 1, 3)
	if s.Drop() != 0 {
		t.Fatal("Drop of an open stream freed something")
	}
	if s.Trim(1<<20) != 0 {
		t.Fatal("Trim freed events no client has read")
	}
	c := attach(t, s)
	out, err := pumpAllAfterClose(t, s, c)
	if err != nil || out == "" {
		t.Fatalf("pump: %v", err)
	}
	before := acct.Used()
	if n := s.Trim(1); n == 0 || acct.Used() != before-int64(n) {
		t.Fatalf("Trim of a read event: freed %d, used %d -> %d", n, before, acct.Used())
	}
	if n := s.Drop(); n == 0 || acct.Used() != 0 || b.Used() != 0 {
		t.Fatalf("Drop of a finished stream: freed %d, account %d, budget %d", n, acct.Used(), b.Used())
	}
	if _, err := s.Resume(1); !errors.Is(err, ErrGone) {
		t.Errorf("resuming a dropped stream: %v, want ErrGone", err)
	}
}

// pumpAllAfterClose closes s and pumps c to the end.
func pumpAllAfterClose(t *testing.T, s *Stream, c *Consumer) (string, error) {
	s.Close(0)
	return pumpAll(t, c, PumpOptions{})
}

// BenchmarkPublishBudget is Publish's cost with and without a budget account: a ring
// that keeps evicting (every event reserved, every evicted one released).
func BenchmarkPublishBudget(b *testing.B) {
	ev := bytes.Repeat([]byte("x"), 512)
	for _, c := range []struct {
		name string
		acct *budget.Account
	}{{"off", nil}, {"on", budget.New(1<<30, 16<<20).Account()}} {
		b.Run(c.name, func(b *testing.B) {
			s := NewStream(1, StreamConfig{Account: c.acct, RingEvents: 64})
			b.ReportAllocs()
			b.SetBytes(int64(len(ev)))
			for i := 0; i < b.N; i++ {
				s.Publish("", ev)
			}
		})
	}
}

// TestBudgetOversizedKeepsRing: an event larger than the whole share is refused without
// evicting the stream's events first (nothing evicted would make it fit): they stay for
// resumption, and a consumer that has not read them is not cut off.
func TestBudgetOversizedKeepsRing(t *testing.T) {
	b := budget.New(1<<30, 64<<10)
	acct := b.Account()
	s := NewStream(3, StreamConfig{Account: acct, RingBytes: 1 << 20})
	c := attach(t, s)
	defer c.Close()
	ev := bytes.Repeat([]byte("k"), 4<<10)
	for i := 0; i < 3; i++ {
		if _, err := s.Publish("", ev); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
	}
	used := acct.Used()
	if _, err := s.Publish("", bytes.Repeat([]byte("x"), 100<<10)); !errors.Is(err, ErrOverBudget) {
		t.Fatalf("event over the share: %v, want ErrOverBudget", err)
	}
	if n := s.Stats().Evictions.Load(); n != 0 {
		t.Errorf("%d events evicted for an event that could never fit", n)
	}
	if n := s.Stats().CutOffs.Load(); n != 0 {
		t.Errorf("consumer cut off %d times for an event that could never fit", n)
	}
	if acct.Used() != used || s.Last().Seq != 3 {
		t.Errorf("used %d (was %d), last %d: want the three events kept", acct.Used(), used, s.Last().Seq)
	}
	if _, err := s.Resume(0); err != nil {
		t.Errorf("resuming from the start: %v", err)
	}
}
