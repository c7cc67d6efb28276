package fleet

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcprouter/mcprouter/internal/ctxtime"
)

// Presence of the processes that hold upstream subscriptions. An owner lease outlives
// an instance killed outright by up to the lease's TTL (seconds), and every subscriber
// in the cluster would hear nothing for that long. So each instance answers requests on
// a subject of its own process (P.subs.alive.<id>), and the instances with subscribers
// ask the holders of their keys' leases, every presencePeriod, whether they are there.
// NATS answers "no responders" at once when nobody listens on a subject, and a killed
// process's connection, with its subscriptions, is gone as soon as its socket closes:
// an absence is certain within a period or two, where waiting for a lease takes its TTL.
// A slow answer or a lost connection of our own proves nothing and changes nothing.

// presencePeriod is how often the holders are asked; presenceMisses is how many
// answers in a row must be "no responders" before a holder counts as gone (a NATS node
// that has just restarted may not know every subscription of its peers for a moment).
const (
	presencePeriod = 250 * time.Millisecond
	presenceMisses = 2
)

func (s *clusterSubs) aliveSubject(id string) string { return s.bus.Subject("subs", "alive", id) }

// answerAlive answers a presence request: an empty reply says the process is there.
func answerAlive(m *nats.Msg) { m.Respond(nil) }

// presence asks the holders of the keys this instance has subscribers for whether they
// are alive, and takes over the leases of those that are gone.
func (s *clusterSubs) presence() {
	defer s.bg.Done()
	misses := map[string]int{}
	ctxtime.Every(s.stop, presencePeriod, func() {
		held := s.heldElsewhere()
		for id := range misses {
			if _, still := held[id]; !still {
				delete(misses, id)
			}
		}
		for id, keys := range held {
			if s.present(id) {
				delete(misses, id)
				continue
			}
			if misses[id]++; misses[id] < presenceMisses {
				continue
			}
			delete(misses, id)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			for _, cs := range keys {
				if err := s.takeOver(ctx, cs, id); err != nil {
					s.up.log.Warn("cannot take over an upstream subscription", "backend", cs.key.b.cfg.Name, "uri", cs.key.uri, "err", err)
				}
			}
			cancel()
		}
	})
}

// heldElsewhere groups, by holder, the keys this instance has subscribers for whose
// owner lease another process holds.
func (s *clusterSubs) heldElsewhere() map[string][]*clusterSub {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string][]*clusterSub{}
	for _, cs := range s.keys {
		if !cs.owner && cs.holder != "" && cs.holder != s.id && len(cs.sessions) > 0 {
			out[cs.holder] = append(out[cs.holder], cs)
		}
	}
	return out
}

// present reports whether process id answers, or might (only "no responders" is an
// answer that it is gone).
func (s *clusterSubs) present(id string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err := s.bus.NC.RequestWithContext(ctx, s.aliveSubject(id), nil)
	return !errors.Is(err, nats.ErrNoResponders)
}

// takeOver replaces gone as the holder of cs's owner lease and subscribes upstream. The
// lease is swapped on its revision, so of the instances that noticed together exactly
// one wins; the others read the winner as the new holder.
func (s *clusterSubs) takeOver(ctx context.Context, cs *clusterSub, gone string) error {
	if !cs.claim.TryLock() {
		return nil // this process is taking or finding the lease already
	}
	defer cs.claim.Unlock()
	e, err := s.kv.Get(ctx, s.ownerKey(cs))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return s.ensureOwnerClaimed(ctx, cs) // released or expired meanwhile: free to take
	}
	if err != nil {
		return err
	}
	if holder := string(e.Value()); holder != gone {
		s.setHolder(cs, holder)
		return nil
	}
	rev, err := s.kv.Update(ctx, s.ownerKey(cs), []byte(s.id), e.Revision())
	if err != nil {
		if errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			return s.ensureOwnerClaimed(ctx, cs) // another instance was quicker: note which
		}
		return err
	}
	s.up.log.Info("took over an upstream subscription from a gone instance", "backend", cs.key.b.cfg.Name, "uri", cs.key.uri, "from", gone)
	return s.own(ctx, cs, rev)
}
