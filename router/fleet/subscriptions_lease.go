package fleet

import (
	"context"
	"time"
)

// A subscription is acknowledged to its client once this instance listens for the
// key's updates; the leases (this instance's member lease, and some instance's owner
// lease with the one upstream subscription) are written in the lease bucket, on the
// JetStream that session records and the event log share. When that JetStream is
// flooded (100,000 sessions opening at once wrote their records faster than it could
// store them), a lease write times out: the subscription then stood with nobody
// subscribed upstream until the next heartbeat, a third of the lease away, whose
// writes met the same flood, and one run saw an update reach none of 100,000
// acknowledged subscribers. So a key whose leases could not be written is tried again
// at once in the background, with a backoff from leaseRetryFirst up to the heartbeat's
// period, until its leases are settled or its last local subscriber has gone.

// leaseRetryFirst is the first pause before a lease write that failed is tried again.
const leaseRetryFirst = 50 * time.Millisecond

// retryLease starts the retries of cs's leases, unless they run already or the
// subscriptions are closing.
func (s *clusterSubs) retryLease(cs *clusterSub) {
	s.mu.Lock()
	start := !cs.retrying && !s.closing
	if start {
		cs.retrying = true
		s.retries.Add()
	}
	s.mu.Unlock()
	if !start {
		return
	}
	go func() {
		defer s.retries.Done()
		period := s.bus.Lease() / 3
		delay := leaseRetryFirst
		for {
			t := time.NewTimer(delay)
			select {
			case <-s.stop:
				t.Stop()
				s.endRetry(cs)
				return
			case <-t.C:
			}
			ctx, cancel := context.WithTimeout(context.Background(), period)
			settled := s.settleLeases(ctx, cs)
			cancel()
			if settled {
				return
			}
			delay = min(2*delay, period)
		}
	}()
}

// endRetry marks cs's retries ended.
func (s *clusterSubs) endRetry(cs *clusterSub) {
	s.mu.Lock()
	cs.retrying = false
	s.mu.Unlock()
}

// settleLeases is one retry: it writes cs's member lease if it is not written, and takes
// or finds its owner lease. It reports whether the retries are over: the leases are
// settled, the backend refused the upstream subscription (the heartbeat tries again, as
// for any refusal), or nobody here is subscribed any more. On true the retries are
// marked ended, under the same lock as the check, so that a failure noticed meanwhile
// starts new ones.
func (s *clusterSubs) settleLeases(ctx context.Context, cs *clusterSub) bool {
	s.mu.Lock()
	local, member := len(cs.sessions), cs.member
	s.mu.Unlock()
	if local == 0 {
		s.endRetry(cs)
		return true
	}
	if !member {
		if _, err := s.kv.Put(ctx, s.memberKey(cs), []byte("1")); err != nil {
			return false
		}
		s.mu.Lock()
		cs.member = true
		s.mu.Unlock()
	}
	if !cs.claim.TryLock() {
		return false // another goroutine is at it: look again after the pause
	}
	answered, err := s.tryOwnerClaimed(ctx, cs)
	cs.claim.Unlock()
	if !answered {
		return false
	}
	if err != nil {
		s.up.log.Warn("cannot subscribe upstream under the lease", "backend", cs.key.b.cfg.Name, "uri", cs.key.uri, "err", err)
	}
	s.endRetry(cs)
	// The last subscriber may have left while the lease was taken: what it took goes.
	s.releaseIfUnused(ctx, cs)
	return true
}
