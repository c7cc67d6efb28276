package fleet

import (
	"context"
	"log/slog"
	"slices"
	"sync"
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
	return namedBackend("a", digest)
}

// namedBackend is backend name (its tool name+"__echo") on a new scripted connection,
// configured with digest, its calls timing out after a minute.
func namedBackend(name, digest string) (BackendConfig, *scriptedConn) {
	up := &scriptedConn{got: make(chan []byte, 16), done: make(chan struct{})}
	return BackendConfig{Name: name, Prefix: name, Timeout: time.Minute, Digest: digest,
		Dialers: []Dialer{{Addr: "scripted-" + name + "-" + digest, Dial: func(ctx context.Context, sink upstream.Sink) (upstream.Conn, error) {
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
	if n := f.table.clientsOn(f.set.all()[0]); n != 0 {
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
	f.reconf.retire(b)
	if fb.open.Load() != 0 || f.sessions.inUse() != 0 {
		t.Fatalf("after the removal %d upstream sessions open, %d slots taken, want none", fb.open.Load(), f.sessions.inUse())
	}
	for i, s := range sess {
		if st := f.sessions.state(s); st == nil || st.conn(b.instances[0]) != nil {
			t.Fatalf("client session %d: state %v, want open without its upstream session", i, st)
		}
	}
}

// scriptedFleetOf starts a fleet of cfgs (namedBackend's) with one client session,
// whose backend connection is up; Start has waited for every backend's catalog.
func scriptedFleetOf(t *testing.T, up *scriptedConn, cfgs ...BackendConfig) *fleetClient {
	t.Helper()
	f := New(Config{HealthInterval: time.Hour, Logger: slog.New(slog.DiscardHandler), Backends: cfgs})
	f.Start(time.Minute)
	return attachClient(t, f, up)
}

// backendNamed is the fleet's current backend called name, nil if none.
func backendNamed(f *Fleet, name string) *backend {
	for _, b := range f.set.all() {
		if b.cfg.Name == name {
			return b
		}
	}
	return nil
}

// serves reports whether the catalog routes tool to a backend configured with digest.
func serves(f *Fleet, tool, digest string) bool {
	rt, ok := f.catalog.load().tools[tool]
	return ok && rt.b.cfg.Digest == digest
}

// callOn sends tools/call of name's echo tool as client request id and returns the
// request as up (name's connection) got it.
func (fc *fleetClient) callOn(up *scriptedConn, name, id string) codec.Message {
	fc.t.Helper()
	fc.up = up
	fc.send(`{"jsonrpc":"2.0","id":"` + id + `","method":"tools/call","params":{"name":"` + name + Separator + `echo"}}`)
	return fc.upstream()
}

// answerOn answers m on up, and checks the client gets the result of its request id.
func (fc *fleetClient) answerOn(up *scriptedConn, m codec.Message, id string) {
	fc.t.Helper()
	up.sink.Message(codec.AppendResult(nil, m.ID, []byte(`{"content":[]}`)))
	if msg := fc.read(); msg.Kind != codec.KindResult || string(msg.ID) != `"`+id+`"` {
		fc.t.Fatalf("client got kind %v id %s, want the result of %q", msg.Kind, msg.ID, id)
	}
}

// awaitDraining waits until b's retirement waits for its calls.
func awaitDraining(t *testing.T, b *backend) {
	t.Helper()
	testwait.For(t, "the retirement of "+b.cfg.Name+" to wait for its calls", 10*time.Second, func() bool {
		return b.drained.waiters.Load() > 0
	})
}

// stillOpen reports whether ch is still open (not closed, nothing sent).
func stillOpen[T any](ch <-chan T) bool {
	select {
	case <-ch:
		return false
	default:
		return true
	}
}

// TestReconfigureAddChangeRemove walks a backend through the part's three changes: b
// is added (started, its tools served, an Observer index of its own), a is changed
// (its replacement serves, the old one drains and closes), b is removed (drained,
// closed, out of the catalog) and added again under the index it had.
func TestReconfigureAddChangeRemove(t *testing.T) {
	a1, upA1 := namedBackend("a", "v1")
	fc := scriptedFleetOf(t, upA1, a1)
	f := fc.f
	b1, upB1 := namedBackend("b", "v1")

	r := f.Reconfigure([]BackendConfig{a1, b1})
	if !slices.Equal(r.Added, []string{"b"}) || !slices.Equal(r.Kept, []string{"a"}) || len(r.Removed)+len(r.Replaced) != 0 {
		t.Fatalf("adding b: %+v", r)
	}
	testwait.For(t, "b's tools", 10*time.Second, func() bool { return serves(f, "b"+Separator+"echo", "v1") })
	fc.answerOn(upB1, fc.callOn(upB1, "b", "c1"), "c1")
	bIndex := backendNamed(f, "b").index
	if bIndex == backendNamed(f, "a").index || f.BackendName(bIndex) != "b" {
		t.Fatalf("b has index %d named %q, want one of its own", bIndex, f.BackendName(bIndex))
	}

	a2, upA2 := namedBackend("a", "v2")
	r = f.Reconfigure([]BackendConfig{a2, b1})
	if !slices.Equal(r.Replaced, []string{"a"}) || !slices.Equal(r.Kept, []string{"b"}) || len(r.Added)+len(r.Removed) != 0 {
		t.Fatalf("changing a: %+v", r)
	}
	testwait.Recv(t, "the old a drained", 10*time.Second, r.Drained)
	testwait.Recv(t, "the old a's connection closed", 10*time.Second, upA1.done)
	if !serves(f, "a"+Separator+"echo", "v2") {
		t.Fatal("the catalog does not route a's tool to its replacement")
	}
	fc.answerOn(upA2, fc.callOn(upA2, "a", "c2"), "c2")

	r = f.Reconfigure([]BackendConfig{a2})
	if !slices.Equal(r.Removed, []string{"b"}) || !slices.Equal(r.Kept, []string{"a"}) || len(r.Added)+len(r.Replaced) != 0 {
		t.Fatalf("removing b: %+v", r)
	}
	testwait.Recv(t, "b drained", 10*time.Second, r.Drained)
	testwait.Recv(t, "b's connection closed", 10*time.Second, upB1.done)
	if _, ok := f.catalog.load().tools["b"+Separator+"echo"]; ok || backendNamed(f, "b") != nil {
		t.Fatal("b is still served after its removal")
	}
	if f.BackendName(bIndex) != "b" {
		t.Fatalf("index %d is named %q after the removal, want b's figures to keep their name", bIndex, f.BackendName(bIndex))
	}

	b2, upB2 := namedBackend("b", "v2")
	r = f.Reconfigure([]BackendConfig{a2, b2})
	if !slices.Equal(r.Added, []string{"b"}) {
		t.Fatalf("adding b again: %+v", r)
	}
	if got := backendNamed(f, "b").index; got != bIndex {
		t.Fatalf("b added again has index %d, want the %d it had", got, bIndex)
	}
	testwait.For(t, "b's tools again", 10*time.Second, func() bool { return serves(f, "b"+Separator+"echo", "v2") })
	fc.answerOn(upB2, fc.callOn(upB2, "b", "c3"), "c3")
}

// TestRetireWaitsForAnswer: a removed backend with a call in flight stays connected
// while the call waits (its retirement waits on the call, not a poll), the call gets
// its answer, and only then is the backend closed.
func TestRetireWaitsForAnswer(t *testing.T) {
	a, upA := namedBackend("a", "v1")
	bc, upB := namedBackend("b", "v1")
	fc := scriptedFleetOf(t, upA, a, bc)
	m := fc.callOn(upB, "b", "c1")
	b := backendNamed(fc.f, "b")

	r := fc.f.Reconfigure([]BackendConfig{a})
	if !slices.Equal(r.Removed, []string{"b"}) {
		t.Fatalf("reconfiguration %+v, want b removed", r)
	}
	awaitDraining(t, b)
	if !stillOpen(r.Drained) || !stillOpen(upB.done) {
		t.Fatal("b was closed with its call in flight")
	}
	fc.answerOn(upB, m, "c1")
	testwait.Recv(t, "b drained", 10*time.Second, r.Drained)
	testwait.Recv(t, "b's connection closed", 10*time.Second, upB.done)
}

// parkOn puts a call of a 2026-07-28 client to b in f's table as parking.park leaves
// one whose backend asked its client something (mrtr.go): sent on b's connection, then
// parked for the client's retry. It returns the entry's id.
func parkOn(t *testing.T, f *Fleet, b *backend) uint64 {
	t.Helper()
	e := request(new(router.Session), `"p1"`)
	e.x.Stateless, e.backend, e.deadline = true, b, deadlineIn(b.cfg.Timeout)
	f.table.add(e)
	if !f.table.bind(e, b.instances[0].conn.Load()) || f.table.park(e.id, func(*entry) bool { return true }) == nil {
		t.Fatal("the call was not parked")
	}
	return e.id
}

// entriesOn counts every entry of b in t, the router's own requests included.
func entriesOn(t *table, b *backend) int {
	return t.count(func(e *entry) bool { return e.backend == b })
}

// TestRetireWaitsForParked: a removed backend with a call parked for its client's
// retry stays connected while the call is parked (the retry would finish it there),
// and closes once the call ends (here as its TTL would end it: takeParked).
func TestRetireWaitsForParked(t *testing.T) {
	a, upA := namedBackend("a", "v1")
	bc, upB := namedBackend("b", "v1")
	fc := scriptedFleetOf(t, upA, a, bc)
	b := backendNamed(fc.f, "b")
	id := parkOn(t, fc.f, b)

	r := fc.f.Reconfigure([]BackendConfig{a})
	awaitDraining(t, b)
	if !stillOpen(r.Drained) || !stillOpen(upB.done) {
		t.Fatal("b was closed with a call parked for its client's retry")
	}
	if fc.f.table.takeParked(id) == nil {
		t.Fatal("the parked call was gone")
	}
	testwait.Recv(t, "b drained once the parked call ended", 10*time.Second, r.Drained)
	testwait.Recv(t, "b's connection closed", 10*time.Second, upB.done)
}

// TestRetireDeadline: a removed backend with a client's call that outlives the drain
// is closed once its timeout and drainGrace have passed. Such a call is a parked one:
// its wait for the client's retry (Config.ServerRequestTimeout) may be longer than the
// backend's timeout, and no sweep expires it; a sent call is expired at its deadline,
// the backend's timeout, before the drain's.
func TestRetireDeadline(t *testing.T) {
	a, upA := namedBackend("a", "v1")
	bc, upB := namedBackend("b", "v1")
	bc.Timeout = 50 * time.Millisecond
	fc := scriptedFleetOf(t, upA, a, bc)
	b := backendNamed(fc.f, "b")
	id := parkOn(t, fc.f, b)
	defer fc.f.table.takeParked(id)

	start := time.Now()
	r := fc.f.Reconfigure([]BackendConfig{a})
	testwait.Recv(t, "b drained by its deadline", 10*time.Second, r.Drained)
	if waited := time.Since(start); waited < bc.Timeout+drainGrace {
		t.Fatalf("b was closed after %v with a client's call in flight, before its deadline (%v)", waited, bc.Timeout+drainGrace)
	}
	testwait.Recv(t, "b's connection closed", 10*time.Second, upB.done)
}

// TestRetireOwnRequests: a removed 2026-07-28 backend with its listen stream open and
// another of the router's own requests in flight, but no client's call, closes at
// once, not after its timeout (a minute) and drainGrace; both requests fail then.
func TestRetireOwnRequests(t *testing.T) {
	a, upA := namedBackend("a", "v1")
	bc, upB := namedBackend("b", "v1")
	upB.modern = true
	fc := scriptedFleetOf(t, upA, a, bc)
	f := fc.f
	b := backendNamed(f, "b")
	testwait.For(t, "b's listen stream", 10*time.Second, func() bool { return entriesOn(f.table, b) == 1 })
	failed := make(chan error, 1)
	go func() {
		_, err := f.table.call(context.Background(), b.instances[0].conn.Load(), "test/hang", nil)
		failed <- err
	}()
	<-upB.got // the backend has it, and never answers
	if n, clients := entriesOn(f.table, b), f.table.clientsOn(b); n != 2 || clients != 0 {
		t.Fatalf("b has %d entries, %d of them clients', want its listen stream and the hanging request", n, clients)
	}

	r := f.Reconfigure([]BackendConfig{a})
	testwait.Recv(t, "b drained at once", 10*time.Second, r.Drained)
	testwait.Recv(t, "b's connection closed", 10*time.Second, upB.done)
	if err := testwait.Recv(t, "the hanging request to fail", 10*time.Second, failed); err == nil {
		t.Fatal("the hanging request succeeded")
	}
	testwait.For(t, "b's listen stream to end", 10*time.Second, func() bool { return entriesOn(f.table, b) == 0 })
}

// TestRetireTwoAtOnce: two backends retired at once, each with a call in flight, and a
// shutdown's WaitIdle waiting beside them: each retirement ends when its own call is
// answered, the other's answer does not end it, and WaitIdle ends after both.
func TestRetireTwoAtOnce(t *testing.T) {
	a, upA := namedBackend("a", "v1")
	bc, upB := namedBackend("b", "v1")
	cc, upC := namedBackend("c", "v1")
	fc := scriptedFleetOf(t, upA, a, bc, cc)
	f := fc.f
	mb := fc.callOn(upB, "b", "cb")
	mc := fc.callOn(upC, "c", "cc")
	b, c := backendNamed(f, "b"), backendNamed(f, "c")

	rb := f.Reconfigure([]BackendConfig{a, cc})
	rc := f.Reconfigure([]BackendConfig{a})
	if !slices.Equal(rb.Removed, []string{"b"}) || !slices.Equal(rc.Removed, []string{"c"}) {
		t.Fatalf("reconfigurations %+v then %+v, want b then c removed", rb, rc)
	}
	idle := make(chan bool, 1)
	go func() { idle <- f.WaitIdle(context.Background()) }()
	awaitDraining(t, b)
	awaitDraining(t, c)
	testwait.For(t, "WaitIdle to wait", 10*time.Second, func() bool { return f.life.drained.waiters.Load() > 0 })

	fc.answerOn(upC, mc, "cc")
	testwait.Recv(t, "c drained", 10*time.Second, rc.Drained)
	if !stillOpen(rb.Drained) || !stillOpen(upB.done) || !stillOpen(idle) {
		t.Fatal("c's answer ended b's retirement or WaitIdle, with b's call in flight")
	}
	fc.answerOn(upB, mb, "cb")
	testwait.Recv(t, "b drained", 10*time.Second, rb.Drained)
	if !testwait.Recv(t, "WaitIdle once both calls were answered", 10*time.Second, idle) {
		t.Fatal("WaitIdle returned false")
	}
}

// TestRetireDuringShutdown: the fleet closes while a removed backend waits for its
// call: Close ends the retirement (it waits for it), the backend is closed and its
// call answered with an error.
func TestRetireDuringShutdown(t *testing.T) {
	a, upA := namedBackend("a", "v1")
	bc, upB := namedBackend("b", "v1")
	fc := scriptedFleetOf(t, upA, a, bc)
	fc.callOn(upB, "b", "c1")
	b := backendNamed(fc.f, "b")
	r := fc.f.Reconfigure([]BackendConfig{a})
	awaitDraining(t, b)

	closed := make(chan struct{})
	go func() { fc.f.Close(); close(closed) }()
	testwait.Recv(t, "Close with a retirement under way", 10*time.Second, closed)
	if stillOpen(r.Drained) || stillOpen(upB.done) {
		t.Fatal("Close returned before b's retirement ended")
	}
	if msg := fc.read(); msg.Kind != codec.KindError || string(msg.ID) != `"c1"` {
		t.Fatalf("client got kind %v id %s, want an error for \"c1\"", msg.Kind, msg.ID)
	}
}

// TestBackendNameDuringReconfigure: while a Reconfigure waits (holding the part's
// lock) for a replacement to list its tools, BackendName answers at once, for a
// backend named before and for one the reconfiguration adds.
func TestBackendNameDuringReconfigure(t *testing.T) {
	a, upA := namedBackend("a", "v1")
	f := scriptedFleetOf(t, upA, a).f
	a2, _ := namedBackend("a", "v2")
	c, _ := namedBackend("c", "v1")
	var once sync.Once
	dialing, release := make(chan struct{}), make(chan struct{})
	dial := a2.Dialers[0].Dial
	a2.Dialers[0].Dial = func(ctx context.Context, sink upstream.Sink) (upstream.Conn, error) {
		once.Do(func() { close(dialing) })
		select {
		case <-release:
			return dial(ctx, sink)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	done := make(chan Reconfiguration, 1)
	go func() { done <- f.Reconfigure([]BackendConfig{a2, c}) }()
	testwait.Recv(t, "the replacement of a to dial", 10*time.Second, dialing)

	named := make(chan [2]string, 1)
	go func() { named <- [2]string{f.BackendName(0), f.BackendName(1)} }()
	got := testwait.Recv(t, "BackendName while Reconfigure waits", 10*time.Second, named)
	if !stillOpen(done) {
		t.Fatal("Reconfigure returned before its replacement listed its tools")
	}
	if got != [2]string{"a", "c"} || f.BackendName(2) != "" || f.BackendName(-1) != "" {
		t.Fatalf("BackendName gave %q, want a and c (and nothing past them)", got)
	}
	close(release)
	r := testwait.Recv(t, "Reconfigure once the replacement listed its tools", 10*time.Second, done)
	if !slices.Equal(r.Replaced, []string{"a"}) || !slices.Equal(r.Added, []string{"c"}) {
		t.Fatalf("reconfiguration %+v, want a replaced and c added", r)
	}
}
