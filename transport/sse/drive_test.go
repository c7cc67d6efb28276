package sse

import (
	"bytes"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/internal/testwait"
	"github.com/mcprouter/mcprouter/transport/budget"
)

// memSink is an in-memory Sink. TryWrite takes at most take bytes of each frame (all
// when take < 0) and keeps the rest, as a socket with little room would; while blocked
// is set, Write blocks until the sink is interrupted.
type memSink struct {
	mu        sync.Mutex
	out       bytes.Buffer
	kept      []byte
	take      int
	fail      error // TryWrite's error, when set
	tries     int   // TryWrite calls that wrote everything
	blocked   bool
	interrupt chan struct{}
	wrote     chan struct{} // signalled after every write
	once      sync.Once
	ended     chan error
}

func (m *memSink) Interrupt() { m.once.Do(func() { close(m.interrupt) }) }

func (m *memSink) End(err error) { m.ended <- err }

func newMemSink(take int) *memSink {
	return &memSink{take: take, interrupt: make(chan struct{}), wrote: make(chan struct{}, 1), ended: make(chan error, 1)}
}

func (m *memSink) signal() {
	select {
	case m.wrote <- struct{}{}:
	default:
	}
}

func (m *memSink) TryWrite(body []byte, id EventID) (bool, error) {
	p := append([]byte(nil), body...)
	if id.Seq != 0 {
		p = AppendEventEnd(p, id)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	defer m.signal()
	if m.fail != nil {
		return false, m.fail
	}
	if len(m.kept) > 0 {
		m.kept = append(m.kept, p...)
		return false, nil
	}
	n := len(p)
	if m.take >= 0 && m.take < n {
		n = m.take
	}
	m.out.Write(p[:n])
	if n < len(p) {
		m.kept = append(m.kept, p[n:]...)
		return false, nil
	}
	m.tries++
	return true, nil
}

func (m *memSink) Write(p []byte) error {
	m.mu.Lock()
	blocked := m.blocked
	m.mu.Unlock()
	if blocked {
		<-m.interrupt
		return errors.New("write interrupted")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	defer m.signal()
	m.out.Write(m.kept)
	m.kept = nil
	m.out.Write(p)
	return nil
}

func (m *memSink) String() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.out.String()
}

// waitFor waits until the sink's output satisfies ok.
func (m *memSink) waitFor(t *testing.T, what string, ok func(string) bool) string {
	t.Helper()
	deadline := time.After(waitLimit)
	for {
		if out := m.String(); ok(out) {
			return out
		}
		select {
		case <-m.wrote:
		case <-deadline:
			t.Fatalf("timed out waiting for %s; output %q", what, m.String())
		}
	}
}

// waitIdle waits until no goroutine holds c's sink: the next event is written by
// Publish.
func waitIdle(t *testing.T, c *Consumer) {
	t.Helper()
	testwait.For(t, "the driven consumer idle", waitLimit, func() bool {
		c.s.mu.Lock()
		defer c.s.mu.Unlock()
		return !c.busy
	})
}

// drive attaches a consumer to s and drives it into sink; the returned channel gets
// the stream's end.
func drive(t *testing.T, s *Stream, sink *memSink, opts PumpOptions) (*Consumer, chan error) {
	t.Helper()
	c := attach(t, s)
	if err := c.Drive(sink, opts); err != nil {
		t.Fatal(err)
	}
	return c, sink.ended
}

// TestDriveInline: once the priming event is out, each event is written by Publish
// itself (one TryWrite each), in order, and Close ends the stream with its retry hint.
func TestDriveInline(t *testing.T) {
	s := NewStream(0, StreamConfig{})
	sink := newMemSink(-1)
	c, ended := drive(t, s, sink, PumpOptions{Prime: true, KeepAlive: -1})
	waitIdle(t, c)
	publishN(t, s, 1, 5)
	sink.mu.Lock()
	tries := sink.tries
	sink.mu.Unlock()
	if tries != 5 {
		t.Errorf("%d events written by Publish itself, want 5", tries)
	}
	s.Close(700)
	if err := within(t, ended, "the stream's end"); err != nil {
		t.Fatal(err)
	}
	o := parseAll(t, sink.String())
	checkSeq(t, 0, o.events[1:], 1, 5)
	if !strings.HasSuffix(sink.String(), "retry: 700\n\n") {
		t.Errorf("no retry hint at the end: %q", sink.String())
	}
}

// TestDriveKept: a socket that takes only part of each write; what it kept goes out
// first, with blocking writes, and nothing is lost, duplicated or reordered.
func TestDriveKept(t *testing.T) {
	s := NewStream(0, StreamConfig{})
	sink := newMemSink(7)
	_, ended := drive(t, s, sink, PumpOptions{KeepAlive: -1})
	for i := 1; i <= 50; i++ {
		publishN(t, s, i, i)
	}
	s.Close(0)
	if err := within(t, ended, "the stream's end"); err != nil {
		t.Fatal(err)
	}
	checkSeq(t, 0, parseAll(t, sink.String()).events, 1, 50)
}

// TestDriveKeepAlive: an idle driven stream gets keep-alive comments from its sweeper.
func TestDriveKeepAlive(t *testing.T) {
	s := NewStream(0, StreamConfig{})
	sink := newMemSink(-1)
	_, ended := drive(t, s, sink, PumpOptions{KeepAlive: 5 * time.Millisecond})
	sink.waitFor(t, "two keep-alives", func(o string) bool { return strings.Count(o, ": keep-alive\n\n") >= 2 })
	publishN(t, s, 1, 1)
	s.Close(0)
	if err := within(t, ended, "the stream's end"); err != nil {
		t.Fatal(err)
	}
	checkSeq(t, 0, parseAll(t, sink.String()).events, 1, 1)
	if s.Stats().KeepAlives.Load() < 2 {
		t.Errorf("KeepAlives = %d", s.Stats().KeepAlives.Load())
	}
}

// TestDriveSlowConsumer: a client that takes nothing is cut off past QueueBytes, its
// blocked write interrupted, and its events stay for a resumption.
func TestDriveSlowConsumer(t *testing.T) {
	s := NewStream(0, StreamConfig{QueueBytes: 1024})
	sink := newMemSink(0)
	sink.blocked = true
	_, ended := drive(t, s, sink, PumpOptions{KeepAlive: -1})
	for i := 1; i <= 40; i++ {
		publishN(t, s, i, i)
	}
	if err := within(t, ended, "the cut-off"); err != ErrSlowConsumer {
		t.Fatalf("ended with %v, want ErrSlowConsumer", err)
	}
	if s.Stats().CutOffs.Load() != 1 || s.Attached() {
		t.Errorf("cut-offs %d, attached %v", s.Stats().CutOffs.Load(), s.Attached())
	}
	checkSeq(t, 0, resumeAll(t, s), 1, 40)
}

// resumeAll resumes s from its start, closes it and returns every event the
// resumption replays: what a client reconnecting after the stream's end gets.
func resumeAll(t *testing.T, s *Stream) []rec {
	t.Helper()
	c, err := s.Resume(0)
	if err != nil {
		t.Fatal(err)
	}
	s.Close(0)
	out, err := pumpAll(t, c, PumpOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return parseAll(t, out).events
}

// TestDriveReplaced: a resumption detaches the driven consumer (ErrDetached) and gets
// what it had not written.
func TestDriveReplaced(t *testing.T) {
	s := NewStream(0, StreamConfig{})
	sink := newMemSink(-1)
	_, ended := drive(t, s, sink, PumpOptions{KeepAlive: -1})
	publishN(t, s, 1, 3)
	c, err := s.Resume(1)
	if err != nil {
		t.Fatal(err)
	}
	if err := within(t, ended, "the detachment"); err != ErrDetached {
		t.Fatalf("ended with %v, want ErrDetached", err)
	}
	s.Close(0)
	out, err := pumpAll(t, c, PumpOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkSeq(t, 0, parseAll(t, out).events, 2, 3)
	if q := s.Stats().Queued.Load(); q != 0 {
		t.Errorf("Stats.Queued = %d after both consumers ended, want 0", q)
	}
	if err := c.Drive(sink, PumpOptions{}); err != ErrPumping {
		t.Errorf("Drive after Pump: %v, want ErrPumping", err)
	}
}

// TestDriveConcurrent: publishers on several goroutines and a socket that sometimes
// takes only part of a write; every event arrives once, in order of its id.
func TestDriveConcurrent(t *testing.T) {
	s := NewStream(0, StreamConfig{})
	sink := newMemSink(40)
	_, ended := drive(t, s, sink, PumpOptions{KeepAlive: time.Millisecond})
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 100; i++ {
				if _, err := s.Publish("", payload(i)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	s.Close(0)
	if err := within(t, ended, "the stream's end"); err != nil {
		t.Fatal(err)
	}
	if q := s.Stats().Queued.Load(); q != 0 {
		t.Errorf("Stats.Queued = %d after the stream ended, want 0", q)
	}
	evs := parseAll(t, sink.String()).events
	if len(evs) != 400 {
		t.Fatalf("%d events, want 400", len(evs))
	}
	for k, e := range evs {
		if want := (EventID{Seq: uint64(k + 1)}).String(); e.ID != want {
			t.Fatalf("event %d has id %s, want %s", k, e.ID, want)
		}
	}
}

// TestDriveWriteError: a connection that fails under Publish's own write ends the stream
// with that error, and the event stays for a resumption.
func TestDriveWriteError(t *testing.T) {
	s := NewStream(0, StreamConfig{})
	sink := newMemSink(-1)
	c, ended := drive(t, s, sink, PumpOptions{KeepAlive: -1})
	waitIdle(t, c)
	broken := errors.New("connection reset")
	sink.mu.Lock()
	sink.fail = broken
	sink.mu.Unlock()
	publishN(t, s, 1, 1)
	if err := within(t, ended, "the stream's end"); err != broken {
		t.Fatalf("ended with %v, want the write's error", err)
	}
	if s.Attached() {
		t.Error("the consumer is still attached")
	}
	checkSeq(t, 0, resumeAll(t, s), 1, 1)
}

// TestDiscardWritten: a stream that discards written events gives each back, with its
// bytes in the account, once it is written, inline or by a drain (a socket that takes
// part of each write); one that does not keeps them for resumption. What the client
// reads is the same.
func TestDiscardWritten(t *testing.T) {
	for _, tc := range []struct {
		name    string
		discard bool
		take    int
	}{
		{"kept", false, -1},
		{"discarded inline", true, -1},
		{"discarded by drains", true, 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			acct := budget.New(1<<30, 1<<20).Account()
			s := NewStream(0, StreamConfig{Account: acct})
			if tc.discard {
				s.DiscardWritten()
			}
			sink := newMemSink(tc.take)
			c, ended := drive(t, s, sink, PumpOptions{KeepAlive: -1})
			waitIdle(t, c)
			publishN(t, s, 1, 5)
			waitIdle(t, c)
			s.mu.Lock()
			held, used := s.ring.n, acct.Used()
			s.mu.Unlock()
			if tc.discard && (held != 0 || used != 0) {
				t.Errorf("%d events, %d bytes kept once written", held, used)
			}
			if !tc.discard && (held != 5 || used == 0) {
				t.Errorf("%d events, %d bytes kept for resumption; want 5", held, used)
			}
			s.Close(0)
			if err := within(t, ended, "the stream's end"); err != nil {
				t.Fatal(err)
			}
			checkSeq(t, 0, parseAll(t, sink.String()).events, 1, 5)
		})
	}
}
