package fleet

import (
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/internal/testwait"
)

// TestSessionEndCancelsItsCalls ends a client session with a call in flight: the
// backend hears notifications/cancelled under its own id for that call alone, the fleet
// counts it cancelled and no longer in flight, its late answer goes nowhere, and another
// session's call on the same backend is answered as usual.
func TestSessionEndCancelsItsCalls(t *testing.T) {
	f, up := newScriptedFleet(t, time.Minute, false)
	a := attachClient(t, f, up)
	b := attachClient(t, f, up)
	a.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a__echo"}}`)
	ma := a.upstream()
	b.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a__echo"}}`)
	mb := b.upstream()

	f.SessionClosed(a.sess)
	var note codec.Message
	if err := codec.Scan(testwait.Recv(t, "the backend's cancellation", 10*time.Second, up.got), &note); err != nil {
		t.Fatal(err)
	}
	if string(note.Method) != "notifications/cancelled" || string(note.RequestID) != string(ma.ID) {
		t.Fatalf("backend got %s for %s, want notifications/cancelled for %s", note.Method, note.RequestID, ma.ID)
	}
	if n := f.InFlight(); n != 1 {
		t.Fatalf("%d requests in flight, want 1 (the other session's)", n)
	}
	if got := f.Stats.Cancelled.Load(); got != 1 {
		t.Fatalf("Cancelled = %d, want 1", got)
	}
	a.answer(ma.ID, `{}`) // too late: dropped
	b.answer(mb.ID, `{"ok":true}`)
	if r := b.read(); r.Kind != codec.KindResult || string(r.ID) != "1" {
		t.Fatalf("the other session got kind %v for id %s, want the result of 1", r.Kind, r.ID)
	}
	if got := f.Stats.Unmatched.Load(); got != 1 {
		t.Fatalf("Unmatched = %d, want 1 (the ended session's late answer)", got)
	}
	// A second end of the same session finds nothing left to cancel.
	f.SessionClosed(a.sess)
	if got := f.Stats.Cancelled.Load(); got != 1 {
		t.Fatalf("Cancelled = %d after a second end, want 1", got)
	}
}
