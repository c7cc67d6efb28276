package transport

import (
	"net/netip"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// rateLimiter is a token bucket per client address (golang.org/x/time/rate): burst
// tokens, refilled at rate per second. It bounds how fast one address may open sessions,
// so that churning through sessions (each new one evicting an older one) costs the client
// time, not the router memory. A nil rateLimiter allows everything.
type rateLimiter struct {
	rate  rate.Limit
	burst int

	mu      sync.Mutex
	buckets map[netip.Addr]*rate.Limiter
}

// maxBuckets bounds the addresses remembered; past it, the buckets that refilled (whose
// addresses have been quiet long enough to be back to a full bucket) are forgotten.
const maxBuckets = 65536

// newRateLimiter returns a limiter, or nil when perSecond is negative (no limit).
func newRateLimiter(perSecond float64, burst int) *rateLimiter {
	if perSecond < 0 {
		return nil
	}
	return &rateLimiter{rate: rate.Limit(perSecond), burst: max(burst, 1), buckets: make(map[netip.Addr]*rate.Limiter)}
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
		b = rate.NewLimiter(l.rate, l.burst)
		l.buckets[addr] = b
	}
	r := b.ReserveN(now, 1)
	d := r.DelayFrom(now)
	if d == 0 {
		return 0, true
	}
	r.CancelAt(now)
	if !r.OK() || d == rate.InfDuration {
		return time.Hour, false // rate 0: the burst is all there is
	}
	return d, false
}

// pruneLocked forgets the buckets that are full again by now.
func (l *rateLimiter) pruneLocked(now time.Time) {
	for a, b := range l.buckets {
		if b.TokensAt(now) >= float64(l.burst) {
			delete(l.buckets, a)
		}
	}
}
