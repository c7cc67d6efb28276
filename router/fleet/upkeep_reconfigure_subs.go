package fleet

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcprouter/mcprouter/router"
)

// Subscriptions of a retired backend. Clients' resources/subscribe entries (and a
// listen stream's resource subscriptions, which go through the same subscriber) are
// keyed by backend: once a removed or replaced backend has drained, nothing would ever
// deliver to them or release them, so retire hands them on. A URI that the backend's
// replacement (same name) serves goes to it, which gets its one upstream subscription;
// the others are dropped, with the retired backend's upstream state (the holder, a
// cluster's leases and NATS subscription). They do not move to another backend that
// serves the same URI: the policy admitted the subscription for this backend's name
// (mcp.backend), and might not for the other's. The clients are not told: MCP has no
// notification for a subscription that ended, and the resources/list_changed of the
// removal is their cue.

// subsOwner returns the backend a subscription to uri on retired backend from moves
// to: the one the current catalog routes uri to, if it is from's replacement and
// clients may subscribe to it; nil when none.
func (rc *reconfigurer) subsOwner(from *backend, uri string) *backend {
	b := rc.catalog.load().resourceOwner(uri)
	if b == nil || b.cfg.Name != from.cfg.Name || b.retired.Load() || !b.subscribable() {
		return nil
	}
	return b
}

// unindexLocked takes key (on a retired backend) out of sess's subscriptions, and the
// session out of the index when it has none left. The caller holds the subscriber's
// lock and deletes key's own entry.
func unindexLocked(bySess sessionKeys, sess *router.Session, key subKey) {
	bySess.remove(sess, key)
}

// persistAll saves the subscriptions of each session (their backend names changed, or
// some went).
func persistAll(touched map[*router.Session]struct{}) {
	for sess := range touched {
		sess.Persist()
	}
}

// moveBackend implements subscriber for one process.
func (s *localSubs) moveBackend(from *backend, owner func(uri string) *backend) {
	touched := map[*router.Session]struct{}{}
	var gone, first []subKey
	s.mu.Lock()
	for key, set := range s.byKey {
		if key.b != from {
			continue
		}
		delete(s.byKey, key)
		gone = append(gone, key)
		to := owner(key.uri)
		for sess := range set {
			unindexLocked(s.bySess, sess, key)
			touched[sess] = struct{}{}
			if to != nil && s.addLocked(sess, subKey{b: to, uri: key.uri}) {
				first = append(first, subKey{b: to, uri: key.uri})
			}
		}
	}
	s.mu.Unlock()
	for _, key := range gone {
		s.up.held.take(key) // its session closes with the backend
	}
	for _, key := range first {
		if err := s.up.subscribe(key, "resources/subscribe", nil); err != nil {
			// The new owner refused: the subscription ends here (subscribe logged why).
			s.mu.Lock()
			for sess := range s.byKey[key] {
				s.removeLocked(sess, key)
			}
			s.mu.Unlock()
		}
	}
	persistAll(touched)
}

// moveWait bounds the lease and NATS work of moving a retired backend's subscriptions
// in a cluster.
const moveWait = 10 * time.Second

// moveBackend implements subscriber across the cluster: this instance's part of each
// of from's subscriptions (its NATS subscription, member lease, and owner lease with
// the upstream subscription) is given up, other instances are told an ownership is
// free, and the sessions join the key on the new owner as a subscribe would.
func (s *clusterSubs) moveBackend(from *backend, owner func(uri string) *backend) {
	touched := map[*router.Session]struct{}{}
	moved := map[subKey]struct{}{}
	type goneSub struct {
		cs                   *clusterSub
		member, owner, alone bool
		rev                  uint64
	}
	var gone []goneSub
	s.mu.Lock()
	for key, cs := range s.keys {
		if key.b != from {
			continue
		}
		delete(s.keys, key)
		to := owner(key.uri)
		for sess := range cs.sessions {
			unindexLocked(s.bySess, sess, key)
			touched[sess] = struct{}{}
			if to != nil {
				s.addLocked(sess, subKey{b: to, uri: key.uri})
				moved[subKey{b: to, uri: key.uri}] = struct{}{}
			}
		}
		if cs.nsub != nil {
			cs.nsub.Unsubscribe()
		}
		gone = append(gone, goneSub{cs: cs, member: cs.member, owner: cs.owner, rev: cs.ownerRev})
		// A heartbeat holding cs from before renews nothing of it now.
		cs.sessions, cs.nsub, cs.member, cs.owner = map[*router.Session]struct{}{}, nil, false, false
	}
	for i := range gone {
		// A replacement has the same name, so the same lease keys: its member lease
		// stays.
		gone[i].alone = true
		for _, cs := range s.keys {
			if cs.hash == gone[i].cs.hash {
				gone[i].alone = false
			}
		}
	}
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(s.up.life.ctx, moveWait)
	defer cancel()
	for _, g := range gone {
		s.up.held.take(g.cs.key)
		if g.member && g.alone {
			s.kv.Delete(ctx, s.memberKey(g.cs))
		}
		if g.owner {
			s.kv.Delete(ctx, s.ownerKey(g.cs), jetstream.LastRevision(g.rev))
			s.bus.NC.Publish(s.bus.Subject("subs", "free", g.cs.hash), nil)
		}
	}
	for key := range moved {
		err := s.join(ctx, key)
		s.mu.Lock()
		cs := s.keys[key]
		s.mu.Unlock()
		if err == nil && cs != nil {
			// join stops short of the owner lease when it listened already: the
			// retired backend's lease (the same key for a replacement) is gone now.
			err = s.ensureOwner(ctx, cs)
		}
		if err != nil {
			s.up.log.Warn("a retired backend's subscription could not move", "backend", key.b.cfg.Name, "uri", key.uri, "err", err)
		}
	}
	persistAll(touched)
}
