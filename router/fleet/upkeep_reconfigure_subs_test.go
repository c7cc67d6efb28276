package fleet

import (
	"context"
	"errors"
	"log/slog"
	"runtime"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/internal/testwait"
	"github.com/mcprouter/mcprouter/transport/natsbus"
)

// subscribeR subscribes fc's session to file:///r (served by backend "a") and answers
// the upstream subscription.
func subscribeR(t *testing.T, fc *fleetClient) {
	t.Helper()
	relayR(t, fc, "1", "resources/subscribe")
}

// relayR sends method (resources/subscribe or resources/unsubscribe) for file:///r as
// fc's request id, checks that fc's current backend gets it and answers it, and that the
// client gets the result.
func relayR(t *testing.T, fc *fleetClient, id, method string) {
	t.Helper()
	fc.send(`{"jsonrpc":"2.0","id":` + id + `,"method":"` + method + `","params":{"uri":"file:///r"}}`)
	up := fc.upstream()
	if string(up.Method) != method {
		t.Fatalf("backend got %s, want %s", up.Method, method)
	}
	fc.answer(up.ID, `{}`)
	if r := fc.read(); string(r.ID) != id || r.Kind != codec.KindResult {
		t.Fatalf("client got %v for %s, want the result of %s", r.Kind, r.ID, id)
	}
}

// subsOn counts what the process's subscription tables still hold of b: index entries
// by key and by session, and upstream holders.
func subsOn(f *Fleet, b *backend) int {
	s := f.subs.(*localSubs)
	n := 0
	s.mu.Lock()
	for key := range s.byKey {
		if key.b == b {
			n++
		}
	}
	for _, keys := range s.bySess {
		for _, key := range keys {
			if key.b == b {
				n++
			}
		}
	}
	s.mu.Unlock()
	s.up.held.mu.Lock()
	for key := range s.up.held.m {
		if key.b == b {
			n++
		}
	}
	s.up.held.mu.Unlock()
	return n
}

// TestRemovedBackendDropsSubscriptions: a client subscribed to a backend's resource;
// the backend is removed: once it drained, the subscription tables hold nothing of it
// (no entry, no upstream holder), the session lists no subscription, and the
// goroutines the backend ran are gone.
func TestRemovedBackendDropsSubscriptions(t *testing.T) {
	fc := newFleetClient(t, time.Minute)
	subscribeR(t, fc)
	b := fc.f.set.all()[0]
	if subsOn(fc.f, b) == 0 {
		t.Fatal("the subscription is not in the tables")
	}
	before := runtime.NumGoroutine()
	r := fc.f.Reconfigure(nil)
	if len(r.Removed) != 1 {
		t.Fatalf("reconfiguration %+v, want a removed", r)
	}
	testwait.Recv(t, "the backend drained", 10*time.Second, r.Drained)
	if n := subsOn(fc.f, b); n != 0 {
		t.Fatalf("%d subscription entries left on the removed backend", n)
	}
	if got := fc.f.SessionSubscriptions(fc.sess); len(got) != 0 {
		t.Fatalf("session still lists %v", got)
	}
	if n := fc.f.Subscriptions(); n != 0 {
		t.Fatalf("%d upstream subscriptions left", n)
	}
	testwait.For(t, "the removed backend's goroutines to end", 10*time.Second, func() bool {
		return runtime.NumGoroutine() < before
	})
}

// TestReplacedBackendKeepsSubscriptions: the backend is replaced by one that serves
// the same resource: the subscription moves to it (one upstream subscribe on the new
// backend), the session keeps it, the old backend's entries go, and the new backend's
// updates reach the client's session.
func TestReplacedBackendKeepsSubscriptions(t *testing.T) {
	fc := newFleetClient(t, time.Minute)
	subscribeR(t, fc)
	old := fc.f.set.all()[0]
	v2, up2 := scriptedBackend("v2")
	r := fc.f.Reconfigure([]BackendConfig{v2})
	fc.up = up2
	if up := fc.upstream(); string(up.Method) != "resources/subscribe" || string(up.URI) != "file:///r" {
		t.Fatalf("new backend got %s %s, want resources/subscribe file:///r", up.Method, up.URI)
	} else {
		fc.answer(up.ID, `{}`)
	}
	testwait.Recv(t, "the old backend drained", 10*time.Second, r.Drained)
	if n := subsOn(fc.f, old); n != 0 {
		t.Fatalf("%d subscription entries left on the replaced backend", n)
	}
	if got := fc.f.SessionSubscriptions(fc.sess); len(got) != 1 || got[0] != [2]string{"a", "file:///r"} {
		t.Fatalf("SessionSubscriptions = %v, want a file:///r", got)
	}
	before := fc.f.Stats.FanOut.Load()
	up2.sink.Message([]byte(`{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"file:///r"}}`))
	if got := fc.f.Stats.FanOut.Load() - before; got != 1 {
		t.Fatalf("the new backend's update reached %d sessions, want 1", got)
	}
	// The last subscriber leaving ends the subscription on the new backend.
	relayR(t, fc, "2", "resources/unsubscribe")
}

// TestRemovedBackendDropsClusterSubscriptions: the same as
// TestRemovedBackendDropsSubscriptions with subscriptions kept across a cluster (NATS
// with JetStream): once the backend is removed, this instance holds no entry of it, no
// NATS subscription for its updates, and the lease bucket no member or owner lease.
func TestRemovedBackendDropsClusterSubscriptions(t *testing.T) {
	bus, err := natsbus.Start(natsbus.Config{StoreDir: t.TempDir()}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer bus.Close()
	f, up := newScriptedFleetOn(t, time.Minute, false, bus)
	fc := attachClient(t, f, up)
	cs, ok := f.subs.(*clusterSubs)
	if !ok {
		t.Fatalf("subscriber %T, want the cluster's", f.subs)
	}
	subscribeR(t, fc)
	b := f.set.all()[0]
	sub := cs.keys[subKey{b: b, uri: "file:///r"}]
	if sub == nil || !sub.owner || !sub.member {
		t.Fatalf("the subscription is not held in the cluster: %+v", sub)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	leases := func() int {
		n := 0
		for _, k := range []string{cs.ownerKey(sub), cs.memberKey(sub)} {
			if _, err := cs.kv.Get(ctx, k); err == nil {
				n++
			} else if !errors.Is(err, jetstream.ErrKeyNotFound) {
				t.Fatal(err)
			}
		}
		return n
	}
	if n := leases(); n != 2 {
		t.Fatalf("%d leases held, want the owner's and the member's", n)
	}

	r := f.Reconfigure(nil)
	testwait.Recv(t, "the backend drained", 10*time.Second, r.Drained)
	cs.mu.Lock()
	n := len(cs.keys) + len(cs.bySess)
	cs.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d subscription entries left", n)
	}
	if sub.nsub != nil || sub.owner || sub.member {
		t.Fatalf("the removed backend's subscription still listens or holds: %+v", sub)
	}
	if n := leases(); n != 0 {
		t.Fatalf("%d leases left in the bucket", n)
	}
	if got := f.SessionSubscriptions(fc.sess); len(got) != 0 {
		t.Fatalf("session still lists %v", got)
	}
}
