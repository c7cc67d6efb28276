package transport

import (
	"net/netip"
	"sync"
	"time"
)

// rateLimiter is a token bucket per client address: burst tokens, refilled at rate per
// second. It bounds how fast one address may open sessions, so that churning through
// sessions (each new one evicting an older one) costs the client time, not the router
// memory. A nil rateLimiter allows everything.
type rateLimiter struct {
	rate  float64
	burst float64

	mu      sync.Mutex
	buckets map[netip.Addr]bucket
}

type bucket struct {
	tokens float64
	at     time.Time
}

// maxBuckets bounds the addresses remembered; past it, the buckets that refilled (whose
// addresses have been quiet long enough to be back to a full bucket) are forgotten.
const maxBuckets = 65536

// newRateLimiter returns a limiter, or nil when rate is negative (no limit).
func newRateLimiter(rate float64, burst int) *rateLimiter {
	if rate < 0 {
		return nil
	}
	return &rateLimiter{rate: rate, burst: float64(max(burst, 1)), buckets: make(map[netip.Addr]bucket)}
}

// allow takes a token from addr's bucket; when there is none it reports how long until
// there is one. The zero address (no address: stdio, NATS) is never limited.
func (l *rateLimiter) allow(addr netip.Addr, now time.Time) (time.Duration, bool) {
	if l == nil || !addr.IsValid() {
		return 0, true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.buckets[addr]
	if !ok {
		if len(l.buckets) >= maxBuckets {
			if l.pruneLocked(now); len(l.buckets) >= maxBuckets {
				return time.Second, false // every remembered address is busy: fail closed
			}
		}
		b = bucket{tokens: l.burst, at: now}
	}
	b.tokens = min(l.burst, b.tokens+now.Sub(b.at).Seconds()*l.rate)
	b.at = now
	if b.tokens < 1 {
		l.buckets[addr] = b
		if l.rate == 0 {
			return time.Hour, false
		}
		return time.Duration((1 - b.tokens) / l.rate * float64(time.Second)), false
	}
	b.tokens--
	l.buckets[addr] = b
	return 0, true
}

// pruneLocked forgets the buckets that are full again by now.
func (l *rateLimiter) pruneLocked(now time.Time) {
	for a, b := range l.buckets {
		if b.tokens+now.Sub(b.at).Seconds()*l.rate >= l.burst {
			delete(l.buckets, a)
		}
	}
}
