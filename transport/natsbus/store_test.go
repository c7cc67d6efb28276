package natsbus

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcprouter/mcprouter/transport"
)

// The session store saves, loads, overwrites and forgets records, and another
// instance on the same NATS reads what the first one wrote.
func TestSessionStore(t *testing.T) {
	sa, sb := twoStores(t)
	if _, ok := sa.Load("never-saved"); ok {
		t.Fatal("a record that was never saved loads")
	}
	if err := sa.Save("sess-1", []byte(`{"v":1}`)); err != nil {
		t.Fatal(err)
	}
	shareRecord(t, sa, sb, "sess-1", `{"v":2}`) // overwrites v1
	sb.Delete("sess-1")                         // deleting twice is harmless
	if sa.Errors.Load() != 0 || sb.Errors.Load() != 0 {
		t.Fatalf("errors counted on the ordinary path: %d %d", sa.Errors.Load(), sb.Errors.Load())
	}
}

// shareRecord saves rec under id on w and checks that r, another instance on the same
// NATS, loads it as the last write; then deletes it on r and checks that w no longer
// loads it.
func shareRecord(t *testing.T, w, r *SessionStore, id, rec string) {
	t.Helper()
	if err := w.Save(id, []byte(rec)); err != nil {
		t.Fatal(err)
	}
	if got, ok := r.Load(id); !ok || string(got) != rec {
		t.Fatalf("the other instance loads %q %v, want the last write %s", got, ok, rec)
	}
	r.Delete(id)
	if _, ok := w.Load(id); ok {
		t.Fatal("a deleted record still loads")
	}
}

// Ids a client chose are checked before they reach the bucket: an id the bucket could
// not hold is simply unknown, not an error.
func TestSessionStoreKeys(t *testing.T) {
	s, err := startBus(t, Config{}).Sessions(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"", "a.b", "a*", "a>", "a b", "ü", strings.Repeat("x", 257)} {
		if _, ok := s.Load(id); ok {
			t.Errorf("Load(%q) found a record", id)
		}
	}
	if s.Errors.Load() != 0 {
		t.Fatalf("invalid ids counted as %d store errors", s.Errors.Load())
	}
	long := strings.Repeat("x", 256)
	if err := s.Save(long, []byte("r")); err != nil {
		t.Fatal(err)
	}
	if rec, ok := s.Load(long); !ok || string(rec) != "r" {
		t.Fatalf("a 256-byte id: %q %v", rec, ok)
	}
	// Save does not check: the router makes the ids it saves. The bucket refuses a
	// key it cannot hold, and the refusal is counted.
	if err := s.Save("a b", []byte("r")); err == nil {
		t.Fatal("the bucket took a key with a space")
	}
	if s.Errors.Load() != 1 {
		t.Fatalf("errors %d, want 1", s.Errors.Load())
	}
}

// A record expires ttl after its last write.
func TestSessionStoreExpiry(t *testing.T) {
	s, err := startBus(t, Config{}).Sessions(200 * time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Save("short-lived", []byte("r")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the record to expire", func() bool {
		_, ok := s.Load("short-lived")
		return !ok
	})
}

// With NATS gone, every operation fails fast and is counted; Load tries twice.
func TestSessionStoreClosed(t *testing.T) {
	b, s := busStore(t)
	b.Close()
	if err := s.Save("s1", []byte("r")); err == nil {
		t.Fatal("Save on a closed bus succeeded")
	}
	if _, ok := s.Load("s1"); ok {
		t.Fatal("Load on a closed bus found a record")
	}
	s.Delete("s1") // must not hang or panic
	if n := s.Errors.Load(); n != 3 {
		t.Fatalf("errors %d, want 3 (one Save, two Load attempts)", n)
	}
}

// appendEvents logs events seq from..to (inclusive) for a session, with data "<id>:<seq>".
func appendEvents(l *EventLog, id string, from, to uint64) {
	for seq := from; seq <= to; seq++ {
		l.Append(id, seq, []byte(fmt.Sprintf("%s:%d", id, seq)))
	}
}

// checkEvents compares a session's logged events with seqs from..to.
func checkEvents(t *testing.T, got []transport.LoggedEvent, id string, from, to uint64) {
	t.Helper()
	if want := int(to - from + 1); len(got) != want {
		t.Fatalf("%s: %d events, want %d", id, len(got), want)
	}
	for i, e := range got {
		seq := from + uint64(i)
		if e.Seq != seq || string(e.Data) != fmt.Sprintf("%s:%d", id, seq) {
			t.Fatalf("%s: event %d is %d %q, want %d", id, i, e.Seq, e.Data, seq)
		}
	}
}

// The event log keeps each session's events apart, in order, with their sequence
// numbers, and only the most recent perSession of them.
func TestEventLog(t *testing.T) {
	b := startBus(t, Config{Prefix: "evt"})
	l, err := b.Events(5, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	appendEvents(l, "s1", 1, 3)
	appendEvents(l, "s2", 1, 8)
	got, err := l.Since("s1")
	if err != nil {
		t.Fatal(err)
	}
	checkEvents(t, got, "s1", 1, 3)
	got, err = l.Since("s2")
	if err != nil {
		t.Fatal(err)
	}
	checkEvents(t, got, "s2", 4, 8) // the three oldest were discarded
	if got, err := l.Since("nobody"); err != nil || len(got) != 0 {
		t.Fatalf("a session without events: %v %v", got, err)
	}
	if l.Errors.Load() != 0 {
		t.Fatalf("%d errors", l.Errors.Load())
	}
}

// Append keeps its own copy of the data: the caller may reuse its buffer at once.
func TestEventLogCopiesData(t *testing.T) {
	l, err := startBus(t, Config{}).Events(10, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	buf := []byte("s:1")
	l.Append("s", 1, buf)
	copy(buf, "XXX")
	got, err := l.Since("s")
	if err != nil {
		t.Fatal(err)
	}
	checkEvents(t, got, "s", 1, 1)
}

// More events than one fetch returns come back whole and in order.
func TestEventLogManyEvents(t *testing.T) {
	l, err := startBus(t, Config{}).Events(1000, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	appendEvents(l, "busy", 1, 600)
	got, err := l.Since("busy")
	if err != nil {
		t.Fatal(err)
	}
	checkEvents(t, got, "busy", 1, 600)
}

// The log a session left on one instance is read by another: what a resumed stream
// needs after its instance went away.
func TestEventLogAcrossInstances(t *testing.T) {
	a := startBus(t, withUser(Config{Listen: "127.0.0.1:0"}))
	b := startBus(t, withUser(Config{URL: a.ClientURL()}))
	la, err := a.Events(100, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	lb, err := b.Events(100, time.Hour) // the same stream, opened again
	if err != nil {
		t.Fatal(err)
	}
	appendEvents(la, "moved", 1, 20)
	// The publishes are asynchronous: they are in the stream once acknowledged.
	select {
	case <-a.JS.PublishAsyncComplete():
	case <-time.After(waitLimit):
		t.Fatal("publishes not acknowledged")
	}
	got, err := lb.Since("moved")
	if err != nil {
		t.Fatal(err)
	}
	checkEvents(t, got, "moved", 1, 20)
}

// Session ids that are not one subject token are neither logged nor looked up.
func TestEventLogInvalidIDs(t *testing.T) {
	l, err := startBus(t, Config{Prefix: "inv"}).Events(10, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"", "a.b", "*", ">", "a b", strings.Repeat("y", 257)} {
		l.Append(id, 1, []byte("x"))
		if _, err := l.Since(id); err == nil {
			t.Errorf("Since(%q) without an error", id)
		}
	}
	// Nothing reached the stream: a wildcard read of it finds no message.
	appendEvents(l, "ok", 1, 1)
	got, err := l.Since("ok")
	if err != nil {
		t.Fatal(err)
	}
	checkEvents(t, got, "ok", 1, 1)
	info, err := l.stream.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 1 || l.Errors.Load() != 0 {
		t.Fatalf("%d messages in the stream and %d errors, want the one valid event", info.State.Msgs, l.Errors.Load())
	}
}

// An append on a closed bus is counted, not lost silently; Since reports the failure.
func TestEventLogClosed(t *testing.T) {
	b, err := Start(Config{}, quietLog)
	if err != nil {
		t.Fatal(err)
	}
	l, err := b.Events(10, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	b.Close()
	l.Append("s", 1, []byte("late"))
	if l.Errors.Load() != 1 {
		t.Fatalf("errors %d, want 1", l.Errors.Load())
	}
	if _, err := l.Since("s"); err == nil {
		t.Fatal("Since on a closed bus succeeded")
	}
}

// A forgotten session's purge marker carries a TTL of its own (markerTTL), so that ended
// sessions do not pile up markers in the bucket for as long as a record would live.
func TestSessionStoreMarkerTTL(t *testing.T) {
	b := startBus(t, Config{})
	s, err := b.Sessions(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Save("ended", []byte("r")); err != nil {
		t.Fatal(err)
	}
	s.Delete("ended")
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	st, err := b.JS.Stream(ctx, "KV_"+b.Prefix()+"_sessions")
	if err != nil {
		t.Fatal(err)
	}
	m, err := st.GetLastMsgForSubject(ctx, "$KV."+b.Prefix()+"_sessions.ended")
	if err != nil {
		t.Fatal(err)
	}
	if op, ttl := m.Header.Get("KV-Operation"), m.Header.Get(jetstream.MsgTTLHeader); op != "PURGE" || ttl != markerTTL.String() {
		t.Fatalf("the last message of the ended session: operation %q, TTL %q; want PURGE with TTL %v", op, ttl, markerTTL)
	}
	if _, ok := s.Load("ended"); ok {
		t.Fatal("a deleted record still loads")
	}
}
