package fleet

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/internal/testwait"
	"github.com/mcprouter/mcprouter/router"
	"github.com/mcprouter/mcprouter/transport/upstream"
)

// scriptedBackend is backend "a" (prefix "a") on a new scripted connection, configured
// with digest.
func scriptedBackend(digest string) (BackendConfig, *scriptedConn) {
	up := &scriptedConn{got: make(chan []byte, 16), done: make(chan struct{})}
	return BackendConfig{Name: "a", Prefix: "a", Timeout: time.Minute, Digest: digest,
		Dialers: []Dialer{{Addr: "scripted-" + digest, Dial: func(ctx context.Context, sink upstream.Sink) (upstream.Conn, error) {
			up.sink = sink
			return up, nil
		}}},
	}, up
}

// TestReconfigureReplaceDrains: a backend whose configuration changed is replaced
// while a call to it is in flight: the call still gets its answer from the old
// backend, which then closes; the next call goes to the new one (list_changed is
// checked end to end: this harness's sessions have no stream). Reconfiguring with the same configuration again keeps the backend as it is.
func TestReconfigureReplaceDrains(t *testing.T) {
	f, up := newScriptedFleet(t, time.Minute, false)
	fc := attachClient(t, f, up)
	fc.send(`{"jsonrpc":"2.0","id":"c1","method":"tools/call","params":{"name":"a__echo"}}`)
	m := fc.upstream()

	v2, up2 := scriptedBackend("v2")
	r := f.Reconfigure([]BackendConfig{v2})
	if !slices.Equal(r.Replaced, []string{"a"}) || len(r.Added)+len(r.Removed)+len(r.Kept) != 0 {
		t.Fatalf("reconfiguration %+v, want a replaced", r)
	}
	if n := f.table.onBackend(f.set.all()[0]); n != 0 {
		t.Fatalf("the new backend has %d calls, want none", n)
	}
	fc.answer(m.ID, `{"content":[]}`)
	if msg := fc.read(); msg.Kind != codec.KindResult || string(msg.ID) != `"c1"` {
		t.Fatalf("client got kind %v id %s, want the result of \"c1\"", msg.Kind, msg.ID)
	}
	testwait.Recv(t, "the old backend drained", 10*time.Second, r.Drained)
	testwait.Recv(t, "the old backend's connection closed", 10*time.Second, up.done)
	testwait.For(t, "the new backend's tools", 10*time.Second, func() bool {
		rt, ok := f.catalog.load().tools["a"+Separator+"echo"]
		return ok && rt.b.cfg.Digest == "v2"
	})

	fc.up = up2
	fc.send(`{"jsonrpc":"2.0","id":"c2","method":"tools/call","params":{"name":"a__echo"}}`)
	m = fc.upstream()
	fc.answer(m.ID, `{"content":[]}`)
	if msg := fc.read(); msg.Kind != codec.KindResult || string(msg.ID) != `"c2"` {
		t.Fatalf("client got kind %v id %s, want the result of \"c2\"", msg.Kind, msg.ID)
	}

	kept := f.set.all()[0]
	r = f.Reconfigure([]BackendConfig{v2})
	if !slices.Equal(r.Kept, []string{"a"}) || r.Changed() || f.set.all()[0] != kept {
		t.Fatalf("same configuration again: %+v, want a kept as it is", r)
	}
	testwait.Recv(t, "nothing to drain", 10*time.Second, r.Drained)
}

// TestRetirePerClient: removing a per-client backend closes the upstream sessions its
// clients had with it and gives their slots back; the client sessions stay open.
func TestRetirePerClient(t *testing.T) {
	f, fb := perClientFleet(t, 4, time.Minute)
	b := f.set.all()[0]
	sess := []*router.Session{new(router.Session), new(router.Session)}
	for _, s := range sess {
		f.sessions.open(s)
		if _, err := openFor(f.sessions, b, s); err != nil {
			t.Fatal(err)
		}
	}
	if fb.open.Load() != 2 || f.sessions.inUse() != 2 {
		t.Fatalf("%d upstream sessions open, %d slots taken, want 2 and 2", fb.open.Load(), f.sessions.inUse())
	}
	f.retire(b)
	if fb.open.Load() != 0 || f.sessions.inUse() != 0 {
		t.Fatalf("after the removal %d upstream sessions open, %d slots taken, want none", fb.open.Load(), f.sessions.inUse())
	}
	for i, s := range sess {
		if st := f.sessions.state(s); st == nil || st.conn(b.instances[0]) != nil {
			t.Fatalf("client session %d: state %v, want open without its upstream session", i, st)
		}
	}
}
