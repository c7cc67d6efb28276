package fleet

import (
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/router"
)

// TestSubscriptionShared checks the per-instance subscriptions: the first subscriber
// makes the one upstream subscription, a second one (another session) shares it, an
// update reaches both, and the upstream subscription goes when the last one leaves.
func TestSubscriptionShared(t *testing.T) {
	fc := newFleetClient(t, time.Minute)
	relayR(t, fc, "1", "resources/subscribe")
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
	relayR(t, fc, "2", "resources/unsubscribe")
	if n := fc.f.Subscriptions(); n != 0 {
		t.Fatalf("%d upstream subscriptions left", n)
	}
}
