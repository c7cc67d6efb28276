package fleet

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/internal/testwait"
	"github.com/mcprouter/mcprouter/router"
	"github.com/mcprouter/mcprouter/transport/natsbus"
)

// leaseWait bounds the waits of these tests: well under the heartbeat's period (a
// third of leaseTestLease), so that what they see is the retry's doing, not the beat's.
const (
	leaseTestLease = 3 * time.Minute
	leaseWait      = 20 * time.Second
)

// leaseFleet starts an embedded NATS server with JetStream, whose buckets hold at most
// maxBytes, and a fleet of one scripted backend on it with one client session.
func leaseFleet(t *testing.T, maxBytes int64) (*fleetClient, *clusterSubs, *natsbus.Bus) {
	t.Helper()
	bus, err := natsbus.Start(natsbus.Config{StoreDir: t.TempDir(), Lease: leaseTestLease,
		JetStream: natsbus.JetStreamConfig{MaxBytes: maxBytes}}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(bus.Close)
	f, up := newScriptedFleetOn(t, time.Minute, false, bus)
	fc := attachClient(t, f, up)
	cs, ok := f.subs.(*clusterSubs)
	if !ok {
		t.Fatalf("subscriber %T, want the cluster's", f.subs)
	}
	return fc, cs, bus
}

// upstreamSubscribe waits for the backend to receive resources/subscribe and answers it.
func upstreamSubscribe(t *testing.T, fc *fleetClient) {
	t.Helper()
	raw := testwait.Recv(t, "the upstream subscription", leaseWait, (<-chan []byte)(fc.up.got))
	var m codec.Message
	if err := codec.Scan(raw, &m); err != nil {
		t.Fatal(err)
	}
	if string(m.Method) != "resources/subscribe" {
		t.Fatalf("backend got %s, want resources/subscribe", m.Method)
	}
	fc.answer(m.ID, `{}`)
}

// held reports whether this instance holds both leases of file:///r, in its state and
// in the bucket.
func held(t *testing.T, cs *clusterSubs, fc *fleetClient) bool {
	t.Helper()
	cs.mu.Lock()
	sub := cs.keys[subKey{b: fc.f.set.all()[0], uri: "file:///r"}]
	ok := sub != nil && sub.owner && sub.member
	cs.mu.Unlock()
	if !ok {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, k := range []string{cs.ownerKey(sub), cs.memberKey(sub)} {
		if _, err := cs.kv.Get(ctx, k); err != nil {
			return false
		}
	}
	return true
}

// TestLeaseRetriedAfterRefusal: the lease bucket refuses every write (JetStream full,
// as a store flooded with session records refuses or times out writes) when a client
// subscribes. The client's subscription is acknowledged, as it stands on this instance;
// once the bucket takes writes again, this instance writes its member lease, takes the
// owner lease and subscribes upstream on its own, long before the next heartbeat.
func TestLeaseRetriedAfterRefusal(t *testing.T) {
	fc, cs, bus := leaseFleet(t, 16<<10)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Fill the bucket up to its limit, with small entries at the end: no write is
	// taken, however small.
	full := false
	for i := 0; i < 1000 && !full; i++ {
		_, err := cs.kv.Put(ctx, "junk."+strconv.Itoa(i), []byte(strings.Repeat("x", max(1, 1024>>(i/12)))))
		full = err != nil && i/12 >= 10
	}
	if !full {
		t.Fatal("the bucket took 1,000 writes beyond its 16 KiB")
	}

	fc.send(`{"jsonrpc":"2.0","id":1,"method":"resources/subscribe","params":{"uri":"file:///r"}}`)
	if r := fc.read(); string(r.ID) != "1" || r.Kind != codec.KindResult {
		t.Fatalf("client got %v for %s, want the result of 1", r.Kind, r.ID)
	}
	select {
	case m := <-fc.up.got:
		t.Fatalf("backend got %s while no lease could be written", m)
	default:
	}

	// The bucket takes writes again.
	st, err := bus.JS.Stream(ctx, "KV_"+bus.Prefix()+"_subs")
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Purge(ctx, jetstream.WithPurgeSubject("$KV."+bus.Prefix()+"_subs.junk.>")); err != nil {
		t.Fatal(err)
	}
	upstreamSubscribe(t, fc)
	testwait.For(t, "the leases held", leaseWait, func() bool { return held(t, cs, fc) })
	if n := fc.f.Subscriptions(); n != 1 {
		t.Fatalf("%d upstream subscriptions, want 1", n)
	}
}

// TestLeaseAnswerLost: the store applied this instance's Create of the owner lease but
// its answer never arrived (a timeout on a loaded JetStream), so the lease names this
// process while it does not know it holds it. The next attempt finds its own id there,
// takes the lease as its own and subscribes upstream: before, it noted itself as
// another holder, and nobody subscribed upstream until the lease expired.
func TestLeaseAnswerLost(t *testing.T) {
	fc, cs, _ := leaseFleet(t, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	key := subKey{b: fc.f.set.all()[0], uri: "file:///r"}
	lost := &clusterSub{key: key, hash: keyHash(key)}
	if _, err := cs.kv.Create(ctx, cs.ownerKey(lost), []byte(cs.id)); err != nil {
		t.Fatal(err)
	}

	fc.send(`{"jsonrpc":"2.0","id":1,"method":"resources/subscribe","params":{"uri":"file:///r"}}`)
	upstreamSubscribe(t, fc)
	if r := fc.read(); string(r.ID) != "1" || r.Kind != codec.KindResult {
		t.Fatalf("client got %v for %s, want the result of 1", r.Kind, r.ID)
	}
	if !held(t, cs, fc) {
		t.Fatal("the instance does not hold the lease it wrote")
	}
	// It renews the lease as its own: the revision it knows is the lease's.
	cs.mu.Lock()
	sub := cs.keys[key]
	cs.mu.Unlock()
	cs.renew(ctx, sub)
	e, err := cs.kv.Get(ctx, cs.ownerKey(sub))
	if err != nil || string(e.Value()) != cs.id || e.Revision() != sub.ownerRev || !held(t, cs, fc) {
		t.Fatalf("the renewal gave the lease up: %v", err)
	}
}

// TestLeaseWrittenOncePerInstance: many sessions of one instance subscribing to the same
// resource at once write its leases once (the member lease and the owner lease), not
// once per session: on a JetStream flooded with session records, thousands of lease
// writes queued behind the first.
func TestLeaseWrittenOncePerInstance(t *testing.T) {
	fc, _, bus := leaseFleet(t, 0)
	const sessions = 20
	done := make(chan struct{}, sessions)
	for range sessions {
		sess := new(router.Session)
		fc.f.SessionOpened(sess)
		t.Cleanup(func() { fc.f.SessionClosed(sess) })
		go func() {
			fc.f.Resubscribe(sess, [][2]string{{"a", "file:///r"}})
			done <- struct{}{}
		}()
	}
	upstreamSubscribe(t, fc)
	for range sessions {
		testwait.Recv(t, "a subscription in place", leaseWait, (<-chan struct{})(done))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := bus.JS.Stream(ctx, "KV_"+bus.Prefix()+"_subs")
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := info.State.LastSeq; n != 2 {
		t.Fatalf("%d lease writes for %d sessions of one instance, want 2 (member, owner)", n, sessions)
	}
}

// TestClusterSubsCloseConcurrent: close called from several goroutines at once (two
// Fleet.Close calls) closes once, where closing the stop channel twice would panic, and
// every call returns.
func TestClusterSubsCloseConcurrent(t *testing.T) {
	_, cs, _ := leaseFleet(t, 0)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(cs.close)
	}
	wg.Wait()
	cs.close()
}
