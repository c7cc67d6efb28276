package upstream

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/internal/testwait"
)

type deadlineKey struct{}

// TestDeadlineContext: a Deadline behaves as context.WithDeadline of its parent
// whether or not something asked for Done, and arms nothing until then.
func TestDeadlineContext(t *testing.T) {
	parent := context.WithValue(context.Background(), deadlineKey{}, "v")

	d := NewDeadline(parent, time.Now().Add(time.Hour))
	if err := d.Err(); err != nil {
		t.Fatalf("Err before the deadline: %v", err)
	}
	if dl, ok := d.Deadline(); !ok || time.Until(dl) < 59*time.Minute {
		t.Fatalf("Deadline = %v, %v", dl, ok)
	}
	if d.Value(deadlineKey{}) != "v" {
		t.Fatal("Value does not reach the parent")
	}
	if d.started.Load() {
		t.Fatal("a timer was armed before anything asked for Done")
	}
	d.Release()

	past := NewDeadline(parent, time.Now().Add(-time.Millisecond))
	if err := past.Err(); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Err after the deadline: %v", err)
	}
	testwait.Recv(t, "Done of a passed deadline", waitLimit, past.Done())
	if err := past.Err(); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Err once Done: %v", err)
	}
	past.Release()

	soon := NewDeadline(parent, time.Now().Add(20*time.Millisecond))
	testwait.Recv(t, "Done at the deadline", waitLimit, soon.Done())
	if err := soon.Err(); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Err at the deadline: %v", err)
	}
	if soon.Value(deadlineKey{}) != "v" {
		t.Fatal("Value does not reach the parent once armed")
	}
	soon.Release()

	pctx, cancel := context.WithCancel(parent)
	lazy, armed := NewDeadline(pctx, time.Now().Add(time.Hour)), NewDeadline(pctx, time.Now().Add(time.Hour))
	armed.Done()
	stop := context.AfterFunc(armed, func() {}) // a child registered on it
	defer stop()
	cancel()
	testwait.Recv(t, "Done after the parent ended", waitLimit, armed.Done())
	for _, c := range []*Deadline{lazy, armed} {
		if err := c.Err(); !errors.Is(err, context.Canceled) {
			t.Fatalf("Err after the parent ended: %v", err)
		}
	}
	testwait.Recv(t, "Done of the lazy one after the parent ended", waitLimit, lazy.Done())
	lazy.Release()
	armed.Release()

	released := NewDeadline(parent, time.Now().Add(time.Hour))
	released.Done()
	released.Release()
	if err := released.Err(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Err after Release: %v", err)
	}
}

// TestDeadlineTrickledBody: a body written a byte at a time under a Deadline ends at
// the deadline, with a deadline error, although the Deadline never armed a timer: the
// connection's read deadline ends the read.
func TestDeadlineTrickledBody(t *testing.T) {
	for _, ctype := range []string{"application/json", "text/event-stream"} {
		t.Run(ctype, func(t *testing.T) {
			srv := trickling(t, ctype) // reply_test.go
			c, _ := dialHTTP(t, srv.URL, HTTPOptions{})
			defer c.Close()
			dl := NewDeadline(testCtx(t), time.Now().Add(300*time.Millisecond))
			defer dl.Release()
			done := make(chan error, 1)
			go func() { done <- c.Send(dl, []byte(msgList)) }()
			err := testwait.Recv(t, "Send of a trickled body", waitLimit, done)
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Send: %v, want a deadline error", err)
			}
			if dl.started.Load() {
				t.Error("the Deadline armed a timer: the body was watched")
			}
		})
	}
}

// TestDeadlineReset: a Deadline released after its timer was armed and its Detacher
// set is, once Reset, the context of a new Send: the new parent and time, nothing
// armed, no Detacher, nothing ended.
func TestDeadlineReset(t *testing.T) {
	d := NewDeadline(context.Background(), time.Now().Add(-time.Second)) // passed already
	d.Detach(make(detachRec, 1))
	<-d.Done() // armed, and ended
	d.Release()
	parent := context.WithValue(context.Background(), deadlineKey{}, "v")
	at := time.Now().Add(time.Hour)
	d.Reset(parent, at)
	if got, ok := d.Deadline(); !ok || !got.Equal(at) {
		t.Errorf("Deadline() = %v, %v, want %v", got, ok, at)
	}
	if err := d.Err(); err != nil {
		t.Errorf("Err() = %v after Reset", err)
	}
	if d.Value(deadlineKey{}) != "v" || detacherOf(d) != nil {
		t.Error("Reset kept the old parent's values or Detacher")
	}
	select {
	case <-d.Done():
		t.Error("Done closed after Reset")
	default:
	}
	d.Release()
}
