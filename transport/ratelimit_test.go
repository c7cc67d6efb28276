package transport

import (
	"net/netip"
	"testing"
	"time"
)

// TestRateLimiterAllow: an address gets its burst, then waits 1/rate per session; other
// addresses are not charged; no address (stdio, NATS) and a nil limiter are never limited;
// a zero rate allows the burst only.
func TestRateLimiterAllow(t *testing.T) {
	now := time.Unix(1000, 0)
	a, b := netip.MustParseAddr("127.0.0.2"), netip.MustParseAddr("127.0.0.1")
	l := newRateLimiter(10, 3)
	for i := range 3 {
		if _, ok := l.allow(a, now); !ok {
			t.Fatalf("burst token %d refused", i)
		}
	}
	d, ok := l.allow(a, now)
	if ok || d != 100*time.Millisecond {
		t.Fatalf("past the burst: ok %v, retry in %v; want refused, 100ms", ok, d)
	}
	if _, ok := l.allow(b, now); !ok {
		t.Fatal("another address was charged for the first one's sessions")
	}
	if _, ok := l.allow(a, now.Add(100*time.Millisecond)); !ok {
		t.Fatal("a refill of one token was refused (the refused try must not have spent it)")
	}
	if _, ok := l.allow(netip.Addr{}, now); !ok {
		t.Fatal("a session without an address was limited")
	}
	var none *rateLimiter
	if _, ok := none.allow(a, now); !ok || newRateLimiter(-1, 1) != nil {
		t.Fatal("a disabled limiter limited")
	}
	zero := newRateLimiter(0, 1)
	zero.allow(a, now)
	if d, ok := zero.allow(a, now.Add(time.Hour)); ok || d != time.Hour {
		t.Fatalf("rate 0 after its burst: ok %v, %v", ok, d)
	}
}

// TestRateLimiterPrune: quiet addresses whose buckets are full again are forgotten.
func TestRateLimiterPrune(t *testing.T) {
	now := time.Unix(1000, 0)
	l := newRateLimiter(10, 2)
	l.allow(netip.MustParseAddr("127.0.0.2"), now)
	l.allow(netip.MustParseAddr("127.0.0.3"), now.Add(time.Second))
	l.pruneLocked(now.Add(1050 * time.Millisecond))
	if _, kept := l.buckets[netip.MustParseAddr("127.0.0.3")]; !kept || len(l.buckets) != 1 {
		t.Fatalf("after prune: %d buckets; want only the address still refilling", len(l.buckets))
	}
}
