package fleet

import (
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/router"
)

// TestSubscriptionShared checks the per-instance subscriptions: the first subscriber
// makes the one upstream subscription, a second one (another session) shares it, an
// update reaches both, and the upstream subscription goes when the last one leaves.
func TestSubscriptionShared(t *testing.T) {
	fc := newFleetClient(t, time.Minute)
	fc.send(`{"jsonrpc":"2.0","id":1,"method":"resources/subscribe","params":{"uri":"file:///r"}}`)
	up := fc.upstream()
	if string(up.Method) != "resources/subscribe" || string(up.URI) != "file:///r" {
		t.Fatalf("backend got %s %s, want resources/subscribe file:///r", up.Method, up.URI)
	}
	fc.answer(up.ID, `{}`)
	if r := fc.read(); string(r.ID) != "1" || r.Kind != codec.KindResult {
		t.Fatalf("client got %v for %s, want the result of 1", r.Kind, r.ID)
	}
	if n := fc.f.Subscriptions(); n != 1 {
		t.Fatalf("%d upstream subscriptions, want 1", n)
	}

	// Another session joins without a second upstream subscription.
	other := new(router.Session)
	fc.f.SessionOpened(other)
	if got := fc.f.SessionSubscriptions(fc.sess); len(got) != 1 || got[0] != [2]string{"a", "file:///r"} {
		t.Fatalf("SessionSubscriptions = %v", got)
	}
	fc.f.Resubscribe(other, [][2]string{{"a", "file:///r"}})
	before := fc.f.Stats.FanOut.Load()
	fc.up.sink.Message([]byte(`{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"file:///r"}}`))
	if got := fc.f.Stats.FanOut.Load() - before; got != 2 {
		t.Fatalf("update delivered to %d sessions, want 2", got)
	}

	// The last one to leave ends the upstream subscription.
	fc.f.SessionClosed(other)
	fc.send(`{"jsonrpc":"2.0","id":2,"method":"resources/unsubscribe","params":{"uri":"file:///r"}}`)
	if up := fc.upstream(); string(up.Method) != "resources/unsubscribe" {
		t.Fatalf("backend got %s, want resources/unsubscribe", up.Method)
	} else {
		fc.answer(up.ID, `{}`)
	}
	if r := fc.read(); string(r.ID) != "2" {
		t.Fatalf("client got %s, want the answer to 2", r.ID)
	}
	if n := fc.f.Subscriptions(); n != 0 {
		t.Fatalf("%d upstream subscriptions left", n)
	}
}
