package sse

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/internal/testwait"
)

// waitLimit bounds every wait in these tests. It is a deadlock guard, not a timing
// assertion: nothing here expects anything to happen quickly.
const waitLimit = 20 * time.Second

func within[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	return testwait.Recv(t, what, waitLimit, ch)
}

// pumpAll pumps c into a buffer until Pump returns; for streams that end (Close, Done).
func pumpAll(t *testing.T, c *Consumer, opts PumpOptions) (string, error) {
	t.Helper()
	var out bytes.Buffer
	errc := make(chan error, 1)
	go func() { errc <- c.Pump(bufio.NewWriter(&out), opts) }()
	err := within(t, errc, "Pump to return")
	return out.String(), err
}

// client reads a pump's output through a pipe, as a remote client would.
type client struct {
	pr     *io.PipeReader
	events chan rec
	errc   chan error // the Pump's result
	rd     chan error // the reader's end
}

func startPump(c *Consumer, opts PumpOptions) *client {
	pr, pw := io.Pipe()
	cl := &client{pr: pr, events: make(chan rec, 4096), errc: make(chan error, 1), rd: make(chan error, 1)}
	go func() {
		err := c.Pump(bufio.NewWriterSize(pw, 256), opts)
		pw.Close()
		cl.errc <- err
	}()
	go func() {
		r := NewReader(pr, 0)
		for {
			ev, err := r.Next()
			if err != nil {
				cl.rd <- err
				return
			}
			cl.events <- recOf(ev)
		}
	}()
	return cl
}

func (cl *client) next(t *testing.T) rec {
	t.Helper()
	return within(t, cl.events, "an event")
}

// drop simulates the connection breaking: the pump's next write fails.
func (cl *client) drop() { cl.pr.CloseWithError(errors.New("connection reset")) }

func payload(i int) []byte {
	return []byte(`{"jsonrpc":"2.0","method":"m","params":{"n":` + strconv.Itoa(i) + `}}`)
}

// attach attaches a consumer to s from the oldest event it keeps, failing the test if
// s refuses.
func attach(t *testing.T, s *Stream) *Consumer {
	t.Helper()
	c, err := s.Attach(0)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func publishN(t *testing.T, s *Stream, from, to int) {
	t.Helper()
	for i := from; i <= to; i++ {
		id, err := s.Publish("", payload(i))
		if err != nil {
			t.Fatal(err)
		}
		if id.Seq != uint64(i) || id.Stream != s.ID() {
			t.Fatalf("event %d got id %v", i, id)
		}
	}
}

// pumpEvents pumps c with the default options until it returns, failing the test on an
// error, and returns the events it wrote.
func pumpEvents(t *testing.T, c *Consumer) []rec {
	t.Helper()
	out, err := pumpAll(t, c, PumpOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return parseAll(t, out).events
}

// drainAfter attaches a consumer with Attach(0), checks that it starts after event
// start (the oldest one s keeps is start+1), closes s and returns every event the
// consumer gets.
func drainAfter(t *testing.T, s *Stream, start uint64) []rec {
	t.Helper()
	c := attach(t, s)
	if c.Start().Seq != start {
		t.Fatalf("Attach(0) starts after %v, want %d", c.Start(), start)
	}
	s.Close(0)
	return pumpEvents(t, c)
}

// checkSeq checks that events are exactly the stream's events from..to, in order.
func checkSeq(t *testing.T, stream uint32, evs []rec, from, to int) {
	t.Helper()
	if len(evs) != to-from+1 {
		t.Fatalf("got %d events, want %d..%d: %v", len(evs), from, to, evs)
	}
	for k, e := range evs {
		i := from + k
		want := EventID{Stream: stream, Seq: uint64(i)}.String()
		if e.ID != want || e.Data != string(payload(i)) || !e.HasID {
			t.Fatalf("event %d: %v, want id %s", i, e, want)
		}
	}
}

func parseAll(t *testing.T, out string) outcome {
	t.Helper()
	o := feedChunks(0, []byte(out))
	if o.err != nil {
		t.Fatal(o.err)
	}
	return o
}

// TestStreamPostReply is the POST reply case: events, then Close after the final one;
// the pump writes them all, then the retry hint, then returns nil.
func TestStreamPostReply(t *testing.T) {
	tests := []struct {
		name    string
		retry   int
		attach  bool // attach before publishing (else after Close)
		opts    PumpOptions
		wantOut string
	}{
		{
			name: "closed before attach", retry: 0,
			wantOut: "data: {\"n\":1}\nid: 5-1\n\nevent: message\ndata: {\"n\":2}\nid: 5-2\n\n",
		},
		{
			name: "retry on close", retry: 1500, attach: true,
			wantOut: "data: {\"n\":1}\nid: 5-1\n\nevent: message\ndata: {\"n\":2}\nid: 5-2\n\nretry: 1500\n\n",
		},
		{
			name: "primed", retry: 0, attach: true, opts: PumpOptions{Prime: true, RetryMs: 2000},
			wantOut: "id: 5-0\nretry: 2000\ndata:\n\ndata: {\"n\":1}\nid: 5-1\n\nevent: message\ndata: {\"n\":2}\nid: 5-2\n\n",
		},
		{
			name: "retry without priming", retry: 0, opts: PumpOptions{RetryMs: 300},
			wantOut: "retry: 300\n\ndata: {\"n\":1}\nid: 5-1\n\nevent: message\ndata: {\"n\":2}\nid: 5-2\n\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := NewStream(5, StreamConfig{})
			var c *Consumer
			var err error
			if tt.attach {
				c = attach(t, s)
			}
			s.Publish("", []byte(`{"n":1}`))
			s.Publish("message", []byte(`{"n":2}`))
			s.Close(tt.retry)
			if _, err := s.Publish("", []byte("late")); err != ErrClosed {
				t.Fatalf("Publish after Close: %v", err)
			}
			if !tt.attach {
				c = attach(t, s)
			}
			out, err := pumpAll(t, c, tt.opts)
			if err != nil {
				t.Fatalf("Pump: %v", err)
			}
			if out != tt.wantOut {
				t.Errorf("output\n%q\nwant\n%q", out, tt.wantOut)
			}
			if s.Attached() {
				t.Error("still attached after Pump returned")
			}
			// Everything was delivered: nothing left for a fresh consumer.
			if _, err := s.Attach(0); err != ErrClosed {
				t.Errorf("Attach after drain: %v", err)
			}
		})
	}
}

// TestStreamCloseWhilePumping publishes and closes while the pump runs: all events
// arrive, in order, then the pump returns nil.
func TestStreamCloseWhilePumping(t *testing.T) {
	s := NewStream(2, StreamConfig{})
	c := attach(t, s)
	cl := startPump(c, PumpOptions{Prime: true})
	if e := cl.next(t); e.ID != "2-0" || e.Data != "" {
		t.Fatalf("priming event %v", e)
	}
	publishN(t, s, 1, 50)
	s.Close(0)
	var got []rec
	for range 50 {
		got = append(got, cl.next(t))
	}
	checkSeq(t, 2, got, 1, 50)
	if err := within(t, cl.errc, "Pump"); err != nil {
		t.Fatalf("Pump: %v", err)
	}
	if err := within(t, cl.rd, "reader end"); err != io.EOF {
		t.Fatalf("reader: %v", err)
	}
}

// TestStreamResumeExact: a client loses its connection mid-stream and resumes with its
// Last-Event-ID: it gets exactly the events after it, none lost, none twice, even those
// the broken connection had already flushed.
func TestStreamResumeExact(t *testing.T) {
	s := NewStream(3, StreamConfig{})
	c := attach(t, s)
	cl := startPump(c, PumpOptions{Prime: true})
	prime := cl.next(t)
	publishN(t, s, 1, 10)
	var got []rec
	for range 4 {
		got = append(got, cl.next(t))
	}
	cl.drop()
	publishN(t, s, 11, 12) // the idle pump finds the connection broken when it writes these
	if err := within(t, cl.errc, "Pump"); err == nil {
		t.Fatal("Pump returned nil after the connection broke")
	}

	last, ok := ParseEventID([]byte(got[len(got)-1].ID))
	if !ok || last.Stream != 3 {
		t.Fatalf("last id %q", got[len(got)-1].ID)
	}
	c2, err := s.Resume(last.Seq)
	if err != nil {
		t.Fatal(err)
	}
	s.Close(0)
	got = append(got, pumpEvents(t, c2)...)
	checkSeq(t, 3, got, 1, 12)

	// From the priming id (Seq 0), Resume replays from the first event.
	id, _ := ParseEventID([]byte(prime.ID))
	c3, err := s.Resume(id.Seq)
	if err != nil {
		t.Fatal(err)
	}
	checkSeq(t, 3, pumpEvents(t, c3), 1, 12)
	if n := s.Stats().Resumes.Load(); n != 2 {
		t.Errorf("resumes %d, want 2", n)
	}
}

// TestStreamResumeNeverCrossesStreams: with two streams of a session interleaved, a
// Last-Event-ID of one resumes that one only.
func TestStreamResumeNeverCrossesStreams(t *testing.T) {
	stats := new(Stats)
	streams := map[uint32]*Stream{
		1: NewStream(1, StreamConfig{Stats: stats}),
		2: NewStream(2, StreamConfig{Stats: stats}),
	}
	for i := 1; i <= 20; i++ {
		for _, s := range []*Stream{streams[1], streams[2]} {
			if _, err := s.Publish("", payload(i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, s := range streams {
		s.Close(0)
	}
	for _, tt := range []struct {
		last string
		from int
	}{{"2-7", 8}, {"1-7", 8}, {"2-0", 1}, {"1-19", 20}} {
		id, ok := ParseEventID([]byte(tt.last))
		if !ok {
			t.Fatal(tt.last)
		}
		s := streams[id.Stream]
		c, err := s.Resume(id.Seq)
		if err != nil {
			t.Fatal(err)
		}
		checkSeq(t, id.Stream, pumpEvents(t, c), tt.from, 20)
	}
	if got := stats.Events.Load(); got != 40 {
		t.Errorf("shared stats counted %d events", got)
	}
}

func TestStreamResumeErrors(t *testing.T) {
	s := NewStream(4, StreamConfig{RingEvents: 4})
	publishN(t, s, 1, 10) // the ring keeps 7..10
	tests := []struct {
		after uint64
		want  error
	}{
		{0, ErrGone}, {5, ErrGone}, {6, nil}, {9, nil}, {10, nil}, {11, ErrGone}, {1 << 40, ErrGone},
	}
	for _, tt := range tests {
		c, err := s.Resume(tt.after)
		if err != tt.want {
			t.Errorf("Resume(%d): %v, want %v", tt.after, err, tt.want)
		}
		if c != nil {
			c.Close()
		}
	}
	if n := s.Stats().Gone.Load(); n != 4 {
		t.Errorf("gone %d, want 4", n)
	}
	if n := s.Stats().Evictions.Load(); n != 6 {
		t.Errorf("evictions %d, want 6", n)
	}
	// Attach(0) does not fail on eviction: it starts at the oldest event kept.
	checkSeq(t, 4, drainAfter(t, s, 6), 7, 10)
	// Closed: exact positions still replay, the end is ErrClosed.
	if _, err := s.Resume(10); err != ErrClosed {
		t.Errorf("Resume at end of closed stream: %v", err)
	}
	if c, err := s.Resume(8); err != nil {
		t.Errorf("Resume inside closed stream: %v", err)
	} else {
		c.Close()
	}
}

// TestStreamAttachUnwritten: without Last-Event-ID, a new consumer starts after what was
// flushed to the previous one.
func TestStreamAttachUnwritten(t *testing.T) {
	s := NewStream(6, StreamConfig{})
	c := attach(t, s)
	done := make(chan struct{})
	cl := startPump(c, PumpOptions{Done: done})
	publishN(t, s, 1, 3)
	var got []rec
	for range 3 {
		got = append(got, cl.next(t))
	}
	close(done)
	if err := within(t, cl.errc, "Pump"); err != nil {
		t.Fatal(err)
	}
	publishN(t, s, 4, 5)
	c2 := attach(t, s)
	if c2.Start().Seq != 3 {
		t.Errorf("start %v, want 6-3", c2.Start())
	}
	s.Close(0)
	out, err := pumpAll(t, c2, PumpOptions{Prime: true})
	if err != nil {
		t.Fatal(err)
	}
	o := parseAll(t, out)
	if o.events[0].ID != "6-3" || o.events[0].Data != "" {
		t.Fatalf("priming %v", o.events[0])
	}
	got = append(got, o.events[1:]...)
	checkSeq(t, 6, got, 1, 5)
}

// TestStreamAttachReplaces: a new Attach detaches the pumping consumer.
func TestStreamAttachReplaces(t *testing.T) {
	s := NewStream(7, StreamConfig{})
	c := attach(t, s)
	var interrupted atomic.Int32
	cl := startPump(c, PumpOptions{Prime: true, Interrupt: func() { interrupted.Add(1) }})
	cl.next(t)
	c2 := attach(t, s)
	if err := within(t, cl.errc, "Pump"); err != ErrDetached {
		t.Fatalf("replaced Pump: %v", err)
	}
	if interrupted.Load() != 1 {
		t.Errorf("Interrupt called %d times", interrupted.Load())
	}
	if !s.Attached() {
		t.Error("the new consumer is not attached")
	}
	c2.Close()
	if s.Attached() {
		t.Error("Close did not detach")
	}
	if err := c2.Pump(bufio.NewWriter(io.Discard), PumpOptions{}); err != ErrDetached {
		t.Errorf("Pump after Close: %v", err)
	}
	if err := c2.Pump(bufio.NewWriter(io.Discard), PumpOptions{}); err != ErrPumping {
		t.Errorf("second Pump: %v", err)
	}
}

// gateWriter blocks every Write until released, or until failed.
type gateWriter struct {
	entered chan struct{}
	release chan struct{}
	fail    chan struct{}
	mu      sync.Mutex
	buf     bytes.Buffer
}

func newGateWriter() *gateWriter {
	return &gateWriter{entered: make(chan struct{}, 1), release: make(chan struct{}), fail: make(chan struct{})}
}

var errInterrupted = errors.New("write interrupted")

func (g *gateWriter) Write(p []byte) (int, error) {
	notify(g.entered)
	timer := time.NewTimer(waitLimit)
	defer timer.Stop()
	select {
	case <-g.release:
	case <-g.fail:
		return 0, errInterrupted
	case <-timer.C:
		return 0, errors.New("gateWriter: never released")
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.buf.Write(p)
}

// TestStreamSlowConsumerCutOff: a consumer whose writes block falls behind; past
// QueueBytes of new events it is cut off, its blocked write interrupted, its pump
// returns ErrSlowConsumer, and every event can still be resumed.
func TestStreamSlowConsumerCutOff(t *testing.T) {
	s := NewStream(8, StreamConfig{QueueBytes: 1024, RingBytes: 64 << 10})
	c := attach(t, s)
	g := newGateWriter()
	var once sync.Once
	errc := make(chan error, 1)
	go func() {
		errc <- c.Pump(bufio.NewWriterSize(g, 16), PumpOptions{
			Prime:     true,
			Interrupt: func() { once.Do(func() { close(g.fail) }) },
		})
	}()
	within(t, g.entered, "the pump to block") // blocked writing the priming event

	n := 0
	for s.Stats().CutOffs.Load() == 0 {
		if n++; n > 1000 {
			t.Fatal("never cut off")
		}
		if _, err := s.Publish("", payload(n)); err != nil {
			t.Fatal(err)
		}
	}
	// Cut off once more than QueueBytes of events were waiting: with ~50-byte frames
	// that is around 20 events, far from 1000.
	if n < 10 {
		t.Errorf("cut off after only %d events", n)
	}
	if err := within(t, errc, "Pump"); err != ErrSlowConsumer {
		t.Fatalf("Pump: %v", err)
	}
	if s.Attached() {
		t.Error("still attached after cut-off")
	}
	// Publishing goes on, into the ring.
	publishN(t, s, n+1, n+5)
	// The client got nothing (its writes never went through): it resumes from the
	// priming id and gets everything.
	c2, err := s.Resume(0)
	if err != nil {
		t.Fatal(err)
	}
	s.Close(0)
	checkSeq(t, 8, pumpEvents(t, c2), 1, n+5)
	if got := s.Stats().CutOffs.Load(); got != 1 {
		t.Errorf("cut-offs %d", got)
	}
}

// TestStreamSlowConsumerNetPipe is the cut-off over a real synchronous connection whose
// peer stops reading; Interrupt sets a past write deadline, as a server would.
func TestStreamSlowConsumerNetPipe(t *testing.T) {
	s := NewStream(9, StreamConfig{QueueBytes: 2048})
	srv, cli := net.Pipe()
	defer srv.Close()
	defer cli.Close()
	c := attach(t, s)
	errc := make(chan error, 1)
	go func() {
		errc <- c.Pump(bufio.NewWriterSize(srv, 512), PumpOptions{
			Interrupt: func() { srv.SetWriteDeadline(time.Unix(1, 0)) },
		})
	}()
	// The client reads the first event, then stops reading.
	publishN(t, s, 1, 1)
	firstc := make(chan rec, 1)
	go func() {
		r := NewReader(cli, 0)
		if ev, err := r.Next(); err == nil {
			firstc <- recOf(ev)
		}
	}()
	first := within(t, firstc, "the first event")
	checkSeq(t, 9, []rec{first}, 1, 1)
	for i := 2; s.Stats().CutOffs.Load() == 0; i++ {
		if i > 10000 {
			t.Fatal("never cut off")
		}
		publishN(t, s, i, i)
	}
	if err := within(t, errc, "Pump"); err != ErrSlowConsumer {
		t.Fatalf("Pump: %v", err)
	}
}

// TestStreamEvictionCutsConsumer: a consumer whose next event would be evicted is cut off
// rather than silently skipping it.
func TestStreamEvictionCutsConsumer(t *testing.T) {
	s := NewStream(10, StreamConfig{RingEvents: 4})
	c := attach(t, s)
	g := newGateWriter()
	errc := make(chan error, 1)
	go func() { errc <- c.Pump(bufio.NewWriterSize(g, 16), PumpOptions{}) }()
	publishN(t, s, 1, 1)
	within(t, g.entered, "the pump to block") // it took event 1 and is writing it
	publishN(t, s, 2, 5)                      // ring 2..5: still fine
	if s.Stats().CutOffs.Load() != 0 {
		t.Fatal("cut off too early")
	}
	publishN(t, s, 6, 6) // evicts 2, which it has not taken
	if s.Stats().CutOffs.Load() != 1 {
		t.Fatal("not cut off on eviction")
	}
	close(g.release)
	if err := within(t, errc, "Pump"); err != ErrSlowConsumer {
		t.Fatalf("Pump: %v", err)
	}
}

// TestStreamBigEvent: an event larger than the pools, the batch and the queue bound is
// delivered whole to an idle consumer (one event is never too much by itself).
func TestStreamBigEvent(t *testing.T) {
	s := NewStream(11, StreamConfig{QueueBytes: 1024})
	c := attach(t, s)
	cl := startPump(c, PumpOptions{MaxBatch: 4096})
	big := bytes.Repeat([]byte("x"), 300<<10)
	for i := range 3 {
		if _, err := s.Publish("", big); err != nil {
			t.Fatal(err)
		}
		e := cl.next(t)
		if len(e.Data) != len(big) || e.ID != (EventID{11, uint64(i + 1)}).String() {
			t.Fatalf("big event %d: %d bytes, id %s", i, len(e.Data), e.ID)
		}
	}
	publishN(t, s, 4, 4)
	checkSeq(t, 11, []rec{cl.next(t)}, 4, 4)
	s.Close(0)
	if err := within(t, cl.errc, "Pump"); err != nil {
		t.Fatal(err)
	}
	if n := s.Stats().CutOffs.Load(); n != 0 {
		t.Errorf("cut off %d times", n)
	}
}

// TestStreamWriteError: a failing writer ends the pump with its error; the events it
// did not flush are sent to the next consumer.
func TestStreamWriteError(t *testing.T) {
	s := NewStream(12, StreamConfig{})
	publishN(t, s, 1, 3)
	c := attach(t, s)
	werr := errors.New("broken pipe")
	if err := c.Pump(bufio.NewWriter(failWriter{werr}), PumpOptions{}); err != werr {
		t.Fatalf("Pump: %v", err)
	}
	checkSeq(t, 12, drainAfter(t, s, 0), 1, 3)
}

type failWriter struct{ err error }

func (f failWriter) Write([]byte) (int, error) { return 0, f.err }

// signalWriter records what is written and signals when the output contains a marker.
type signalWriter struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	marker string
	seen   chan struct{}
}

func (w *signalWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if strings.Contains(w.buf.String(), w.marker) {
		notify(w.seen)
	}
	return len(p), nil
}

func (w *signalWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

func TestStreamKeepAliveAndDone(t *testing.T) {
	s := NewStream(13, StreamConfig{})
	c := attach(t, s)
	w := &signalWriter{marker: ": keep-alive\n\n", seen: make(chan struct{}, 1)}
	done := make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		errc <- c.Pump(bufio.NewWriter(w), PumpOptions{KeepAlive: time.Millisecond, Done: done, RetryMs: 700})
	}()
	within(t, w.seen, "a keep-alive comment")
	close(done)
	if err := within(t, errc, "Pump"); err != nil {
		t.Fatal(err)
	}
	out := w.String()
	if !strings.HasPrefix(out, "retry: 700\n\n: keep-alive\n\n") || !strings.HasSuffix(out, "\n\nretry: 700\n\n") {
		t.Errorf("output %q", out)
	}
	if s.Stats().KeepAlives.Load() == 0 {
		t.Error("keep-alives not counted")
	}
	if o := parseAll(t, out); len(o.events) != 0 || o.retry != 700 {
		t.Errorf("parsed %v retry %d", o.events, o.retry)
	}
}

func TestStreamMaxDuration(t *testing.T) {
	s := NewStream(14, StreamConfig{})
	publishN(t, s, 1, 2)
	c := attach(t, s)
	out, err := pumpAll(t, c, PumpOptions{MaxDuration: time.Millisecond, RetryMs: 50, KeepAlive: -1})
	if err != nil {
		t.Fatal(err)
	}
	o := parseAll(t, out)
	checkSeq(t, 14, o.events, 1, 2)
	if !strings.HasSuffix(out, "retry: 50\n\n") {
		t.Errorf("no retry hint at the end: %q", out)
	}
	// Polling: the stream is still open, the client comes back with its last id.
	publishN(t, s, 3, 3)
	c2, err := s.Resume(2)
	if err != nil {
		t.Fatal(err)
	}
	s.Close(0)
	checkSeq(t, 14, pumpEvents(t, c2), 3, 3)
}

// TestStreamConcurrentPublish: many goroutines publish while one consumer reads; every
// event arrives once, ids are gapless, and each publisher's events keep their order.
func TestStreamConcurrentPublish(t *testing.T) {
	const publishers, each = 8, 250
	// The ring holds the whole burst: this is about ordering, not about cut-offs (a
	// reader more than RingEvents behind is cut off, see TestStreamEvictionCutsConsumer).
	s := NewStream(15, StreamConfig{RingEvents: publishers * each})
	c := attach(t, s)
	cl := startPump(c, PumpOptions{KeepAlive: -1}) // no keep-alive bytes in Written
	var wg sync.WaitGroup
	for p := range publishers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if _, err := s.Publish("", []byte(fmt.Sprintf("%d:%d", p, i))); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	next := make([]int, publishers)
	for k := 1; k <= publishers*each; k++ {
		e := cl.next(t)
		if e.ID != (EventID{15, uint64(k)}).String() {
			t.Fatalf("event %d has id %s", k, e.ID)
		}
		var p, i int
		if _, err := fmt.Sscanf(e.Data, "%d:%d", &p, &i); err != nil {
			t.Fatal(err)
		}
		if i != next[p] {
			t.Fatalf("publisher %d: got %d, want %d", p, i, next[p])
		}
		next[p]++
	}
	wg.Wait()
	s.Close(0)
	if err := within(t, cl.errc, "Pump"); err != nil {
		t.Fatal(err)
	}
	st := s.Stats().Snapshot()
	if st.Events != publishers*each || st.CutOffs != 0 || st.Written != st.Bytes {
		t.Errorf("stats %+v", st)
	}
}

// TestStreamConcurrentChurn races everything at once for the race detector: publishers,
// consumers attaching and resuming, Close.
func TestStreamConcurrentChurn(t *testing.T) {
	s := NewStream(16, StreamConfig{RingEvents: 64, QueueBytes: 2048, RingBytes: 8192})
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 500; i++ {
				s.Publish("", payload(i))
			}
		}()
	}
	for k := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				var c *Consumer
				var err error
				if k == 0 {
					c, err = s.Attach(0)
				} else {
					c, err = s.Resume(s.Last().Seq / 2)
				}
				if err != nil {
					continue
				}
				done := make(chan struct{})
				close(done)
				c.Pump(bufio.NewWriterSize(io.Discard, 64), PumpOptions{Done: done, Prime: true, KeepAlive: -1})
			}
		}()
	}
	wg.Wait()
	s.Close(0)
	st := s.Stats().Snapshot()
	if st.Events != 2000 {
		t.Errorf("events %d", st.Events)
	}
}

func TestStreamConfigValidate(t *testing.T) {
	tests := []struct {
		cfg StreamConfig
		ok  bool
	}{
		{StreamConfig{}, true},
		{StreamConfig{RingBytes: 1 << 20, QueueBytes: 1 << 20}, true},
		{StreamConfig{RingBytes: 1 << 10, QueueBytes: 1 << 20}, false},
		{StreamConfig{RingEvents: -1}, false},
		{StreamConfig{QueueBytes: -1}, false},
	}
	for _, tt := range tests {
		if err := tt.cfg.Validate(); (err == nil) != tt.ok {
			t.Errorf("Validate(%+v) = %v", tt.cfg, err)
		}
	}
	if got := NewStream(0, StreamConfig{RingBytes: 1000}).cfg.QueueBytes; got != 1000 {
		t.Errorf("default QueueBytes with a small ring: %d", got)
	}
}

func TestPool(t *testing.T) {
	tests := []struct{ n, class int }{
		{0, 0}, {256, 0}, {257, 1}, {512, 1}, {1024, 2}, {4096, 4}, {4097, 5}, {16384, 6}, {65536, 8}, {65537, -1},
	}
	for _, tt := range tests {
		if got := class(tt.n); got != tt.class {
			t.Errorf("class(%d) = %d, want %d", tt.n, got, tt.class)
		}
		bp := getBuf(tt.n)
		if cap(*bp) < tt.n || len(*bp) != 0 {
			t.Errorf("getBuf(%d): len %d cap %d", tt.n, len(*bp), cap(*bp))
		}
		putBuf(bp)
	}
	// A grown buffer between classes serves, and is filed under, the class below.
	for range 100 { // sync.Pool may drop a Put: try a few times
		b := make([]byte, 0, 3000)
		putBuf(&b)
		if got := getBuf(2048); cap(*got) == 3000 {
			return
		}
	}
	if !raceEnabled {
		t.Error("a 3000-byte buffer was never reused for the 2048 class")
	}
}

func TestPublishAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under the race detector")
	}
	s := NewStream(1, StreamConfig{RingEvents: 16})
	data := payload(1)
	for range 64 { // fill the ring: from now on every publish evicts and reuses
		s.Publish("", data)
	}
	if n := testing.AllocsPerRun(1000, func() { s.Publish("", data) }); n > 0.1 {
		t.Errorf("Publish allocates %v times", n)
	}
}

// TestStreamInterruptNotAfterPump: Interrupt acts on what the pump's caller owns (a
// hijacked connection that its server recycles once the caller returns), so it must
// never run after Pump has returned. Replacing a pumping consumer while its pump
// returns, over and over: the caller's release of its connection after Pump and the
// interrupt must be ordered (the race detector reports them otherwise) and the
// interrupt must not see a released connection.
func TestStreamInterruptNotAfterPump(t *testing.T) {
	s := NewStream(9, StreamConfig{})
	c := attach(t, s)
	for i := 0; i < 200; i++ {
		conn := new(int) // what the caller owns while its pump runs; nil once released
		late := false
		started := make(chan struct{}, 1)
		done := make(chan error, 1)
		go func(c *Consumer) {
			opts := PumpOptions{KeepAlive: -1, RetryMs: 1, Interrupt: func() {
				if conn == nil {
					late = true
				}
			}}
			w := bufio.NewWriter(notifyWriter{started})
			err := c.Pump(w, opts)
			conn = nil // the caller gives its connection back
			done <- err
		}(c)
		within(t, started, fmt.Sprintf("the first write of pump %d", i))
		c = attach(t, s)
		if err := within(t, done, "Pump"); err != ErrDetached {
			t.Fatalf("replaced Pump: %v", err)
		}
		if late {
			t.Fatal("Interrupt ran after Pump returned")
		}
	}
	c.Close()
}

// notifyWriter discards what it is given and signals each write.
type notifyWriter struct{ wrote chan struct{} }

func (w notifyWriter) Write(p []byte) (int, error) {
	notify(w.wrote)
	return len(p), nil
}
