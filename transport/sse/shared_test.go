package sse

import (
	"bytes"
	"testing"

	"github.com/mcprouter/mcprouter/transport/budget"
)

// TestSharedAcrossStreams: one Shared published to several streams is sent by each
// with its own ids, mixed with events of their own, and a resumption from any id
// replays exactly the events after it.
func TestSharedAcrossStreams(t *testing.T) {
	streams := []*Stream{NewStream(0, StreamConfig{}), NewStream(3, StreamConfig{}), NewStreamAfter(0, StreamConfig{}, 40)}
	first := []int{1, 1, 41} // the seq of each stream's first event
	for i := 1; i <= 6; i++ {
		var sh *Shared
		if i%2 == 0 {
			sh = NewShared("", payload(i))
		}
		for k, s := range streams {
			var id EventID
			var err error
			if sh != nil {
				id, err = s.PublishShared(sh)
			} else {
				id, err = s.Publish("", payload(i))
			}
			if err != nil || id != (EventID{Stream: s.ID(), Seq: uint64(first[k] + i - 1)}) {
				t.Fatalf("stream %d, event %d: id %v, %v", k, i, id, err)
			}
		}
	}
	for k, s := range streams {
		s.Close(0) // a closed stream stays resumable
		if _, err := s.Resume(uint64(first[k] + 5)); err != ErrClosed {
			t.Errorf("stream %d: resuming after its last event: %v, want ErrClosed", k, err)
		}
		for after := 0; after < 6; after++ {
			c, err := s.Resume(uint64(first[k] - 1 + after))
			if err != nil {
				t.Fatalf("stream %d, resume after %d: %v", k, after, err)
			}
			evs := pumpEvents(t, c)
			if len(evs) != 6-after {
				t.Fatalf("stream %d, resume after %d: %d events: %v", k, after, len(evs), evs)
			}
			for j, e := range evs {
				i := after + 1 + j
				want := EventID{Stream: s.ID(), Seq: uint64(first[k] + i - 1)}.String()
				if e.ID != want || e.Data != string(payload(i)) {
					t.Fatalf("stream %d, resume after %d: event %v, want id %s data %s", k, after, e, want, payload(i))
				}
			}
		}
	}
}

// TestSharedNeverPooled: a Shared evicted from one stream's ring is not given to the
// pool, where the next Publish would overwrite it under the other streams that keep it.
func TestSharedNeverPooled(t *testing.T) {
	a := NewStream(1, StreamConfig{RingEvents: 1})
	b := NewStream(2, StreamConfig{})
	sh := NewShared("", payload(1))
	a.PublishShared(sh)
	b.PublishShared(sh)
	for i := 2; i < 50; i++ { // each evicts a's previous event
		a.Publish("", payload(i))
		b.Publish("", payload(i))
	}
	checkSeq(t, 2, drainAfter(t, b, 0), 1, 49)
}

// TestSharedBudget: every stream that keeps a Shared is charged its whole size, and
// given it back when it evicts it.
func TestSharedBudget(t *testing.T) {
	bud := budget.New(1<<30, 1<<20)
	var accts []*budget.Account
	var streams []*Stream
	for i := 0; i < 3; i++ {
		acct := bud.Account()
		accts = append(accts, acct)
		streams = append(streams, NewStream(0, StreamConfig{Account: acct}))
	}
	sh := NewShared("", bytes.Repeat([]byte("x"), 1000))
	for _, s := range streams {
		if _, err := s.PublishShared(sh); err != nil {
			t.Fatal(err)
		}
	}
	for i, acct := range accts {
		if acct.Used() != int64(cap(sh.body)) {
			t.Errorf("account %d: %d used, want %d", i, acct.Used(), cap(sh.body))
		}
	}
	for _, s := range streams {
		s.Close(0)
		s.Drop()
	}
	if bud.Used() != 0 {
		t.Errorf("%d bytes still charged after every stream dropped its events", bud.Used())
	}
}

// TestSharedCache: the same event is encoded once; another one, or one whose data
// spans lines (not comparable cheaply), is encoded anew and sent right.
func TestSharedCache(t *testing.T) {
	var c SharedCache
	msg := []byte(`{"jsonrpc":"2.0","method":"notifications/resources/updated"}`)
	e1 := c.Get("", msg)
	if e2 := c.Get("", append([]byte(nil), msg...)); e2 != e1 {
		t.Errorf("same message encoded twice")
	}
	if e3 := c.Get("message", msg); e3 == e1 || string(e3.body) != "event: message\ndata: "+string(msg)+"\n" {
		t.Errorf("another event name: %q", e3.body)
	}
	other := []byte(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`)
	if e4 := c.Get("", other); string(e4.body) != "data: "+string(other)+"\n" {
		t.Errorf("another message: %q", e4.body)
	}
	multi := []byte("a\nb")
	m1 := c.Get("", multi)
	if m2 := c.Get("", []byte("a\r\nb")); m2 == m1 || string(m2.body) != "data: a\ndata: b\n" {
		t.Errorf("multi-line data: %q (shared %v)", m2.body, m2 == m1)
	}
	if e := c.Get("", nil); string(e.body) != "data:\n" || c.Get("", []byte{}) != e {
		t.Errorf("empty data: %q", e.body)
	}
}

// TestDriveShared: a driven consumer writes a Shared inline with its own id.
func TestDriveShared(t *testing.T) {
	s := NewStream(4, StreamConfig{})
	sink := newMemSink(-1)
	c, ended := drive(t, s, sink, PumpOptions{KeepAlive: -1})
	waitIdle(t, c)
	for i := 1; i <= 3; i++ {
		if _, err := s.PublishShared(NewShared("", payload(i))); err != nil {
			t.Fatal(err)
		}
	}
	s.Close(0)
	if err := within(t, ended, "the stream's end"); err != nil {
		t.Fatal(err)
	}
	checkSeq(t, 4, parseAll(t, sink.String()).events, 1, 3)
}
