package fleet

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/internal/ctxtime"
	"github.com/mcprouter/mcprouter/router"
	"github.com/mcprouter/mcprouter/transport"
	"github.com/mcprouter/mcprouter/transport/natsbus"
)

// Subscriptions across router instances, used instead of localSubs when the fleet has a
// NATS bus with JetStream. Same callers as localSubs (Prepare, Run, the backend's reader
// goroutine, SessionClosed); its own goroutines are the heartbeat that renews leases and
// the NATS handlers of updates and freed ownerships.

// clusterSubs keeps resources/subscribe across every router instance on one NATS:
//
//   - each instance indexes its own subscribed sessions per (backend, URI) and, while it
//     has any, listens on the subject P.res.<key> and holds a member lease
//     s.<key>.m.<instance> in the P_subs bucket;
//   - exactly one instance in the cluster holds the lease s.<key>.owner and with it the
//     one upstream subscription; it keeps it while any instance has members, and
//     releases both when the last member anywhere is gone;
//   - the owner publishes the backend's notifications/resources/updated on P.res.<key>
//     once; every instance delivers it to its own sessions;
//   - leases expire when not renewed (the bucket's TTL), so an instance that dies releases
//     its memberships, and its ownerships pass to an instance that still has members;
//   - an owner that dies does not keep its subscribers waiting for its lease to expire:
//     the others notice at once that its process is gone and take over (presence.go).
type clusterSubs struct {
	up  *subsUpstream
	bus *natsbus.Bus
	kv  jetstream.KeyValue
	// id names this process in owner leases and in its presence subject: the instance's
	// name and a random part, so that an instance restarted under the same name is not
	// taken for its predecessor (whose upstream subscriptions died with it).
	id    string
	alive *nats.Subscription // answers presence requests for id

	mu     sync.Mutex
	keys   map[subKey]*clusterSub
	bySess sessionKeys

	stop chan struct{}
	// closeOnce runs closeNow once, whoever calls close.
	closeOnce sync.Once
	bg        sync.WaitGroup  // the heartbeat and the presence watch
	retries   ctxtime.Counter // retryLease goroutines (they end on stop)
	leaving   sync.WaitGroup  // asynchronous leaves of closed sessions
	// closing is set (under mu) when close starts waiting for leaving: a session closed
	// after that adds nothing to leaving (WaitGroup.Add must not race with Wait), and
	// close releases its leases anyway.
	closing bool
}

// clusterSub is this instance's part of one (backend, URI) subscription.
type clusterSub struct {
	key subKey
	// only is the set of key alone, shared by the sessions whose one subscription it is
	// (sessionKeys.add).
	only     keySet
	hash     string
	sessions map[*router.Session]struct{}
	nsub     *nats.Subscription
	member   bool   // our member lease is written
	owner    bool   // we hold the upstream subscription
	ownerRev uint64 // revision of our owner lease
	// holder is the id in the owner lease when another process holds it, as last read
	// (empty when unknown); presence asks whether it is still alive.
	holder string
	// retrying: a retryLease goroutine is at work on this key.
	retrying bool
	// joining is closed when the subscriber writing the key's leases (join) is done;
	// nil when none is.
	joining chan struct{}
	// claim is held by the one goroutine of this process taking or finding the owner
	// lease (the joining subscriber, the heartbeat, a retry, a takeover): two would both
	// read our id in the lease one of them just wrote, and subscribe upstream twice.
	claim sync.Mutex
}

func newClusterSubs(up *subsUpstream, bus *natsbus.Bus) (*clusterSubs, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kv, err := leaseBucket(ctx, bus)
	if err != nil {
		return nil, err
	}
	s := &clusterSubs{
		up: up, bus: bus, kv: kv,
		keys: map[subKey]*clusterSub{}, bySess: sessionKeys{},
		stop: make(chan struct{}), id: bus.Name() + "-" + rand.Text(),
	}
	if _, err := bus.NC.Subscribe(bus.Subject("subs", "free", "*"), s.onFree); err != nil {
		return nil, err
	}
	if s.alive, err = bus.NC.Subscribe(s.aliveSubject(s.id), answerAlive); err != nil {
		return nil, err
	}
	s.bg.Add(2)
	go s.heartbeat()
	go s.presence()
	return s, nil
}

// leaseBucket opens (or creates) the bucket of subscription leases. A cluster that is
// still starting (its JetStream meta leader just elected, peers not all known yet)
// refuses or times out a replicated bucket for a moment: that is retried until ctx ends,
// so that a router started together with its cluster does not settle for per-instance
// subscriptions. JetStream switched off is final at once.
func leaseBucket(ctx context.Context, bus *natsbus.Bus) (jetstream.KeyValue, error) {
	delay := 100 * time.Millisecond
	for {
		kv, err := bus.KeyValue(ctx, "subs", bus.Lease())
		if err == nil || errors.Is(err, jetstream.ErrJetStreamNotEnabled) ||
			errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount) {
			return kv, err
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, err
		case <-t.C:
		}
		delay = min(2*delay, time.Second)
	}
}

func keyHash(k subKey) string {
	h := sha256.Sum256([]byte(k.b.cfg.Name + "\x00" + k.uri))
	return hex.EncodeToString(h[:12])
}

func (s *clusterSubs) ownerKey(cs *clusterSub) string { return "s." + cs.hash + ".owner" }

func (s *clusterSubs) memberKey(cs *clusterSub) string { return "s." + cs.hash + ".m." + s.bus.Name() }

// handle records the change locally in order (Prepare) and leaves the NATS and backend
// work to run.
func (s *clusterSubs) handle(sess *router.Session, x *transport.Exchange, b *backend) bool {
	key := subKey{b: b, uri: string(x.Msg.URI)}
	sub := string(x.Msg.Method) == "resources/subscribe"
	s.mu.Lock()
	cs := s.keys[key]
	if sub {
		if s.up.limitReached(s.bySess[sess], key) {
			s.mu.Unlock()
			return s.up.refuse(x)
		}
		s.addLocked(sess, key)
	} else if cs != nil {
		delete(cs.sessions, sess)
		s.bySess.remove(sess, key)
	}
	s.mu.Unlock()
	x.Tag = &subTask{sess: sess, b: b, key: key, sub: sub}
	return true
}

// run makes the cluster agree with the local change, then answers the client.
func (s *clusterSubs) run(x *transport.Exchange, t *subTask) {
	ctx, cancel := context.WithTimeout(s.up.life.ctx, t.b.cfg.Timeout)
	defer cancel()
	var err error
	if t.sub {
		err = s.join(ctx, t.key)
	} else {
		s.leave(ctx, t.key)
	}
	x.Tag = nil
	if err != nil {
		s.mu.Lock()
		if cs := s.keys[t.key]; cs != nil {
			delete(cs.sessions, t.sess)
		}
		s.bySess.remove(t.sess, t.key)
		s.mu.Unlock()
		s.leave(ctx, t.key)
		s.up.rep.replyErr(x, codec.CodeBackendUnavailable, "backend "+t.b.cfg.Name+": cannot subscribe: "+err.Error())
		return
	}
	t.sess.Persist()
	s.up.rep.reply(x, []byte("{}"))
}

// join makes sure this instance listens for the key's updates, holds a member lease, and
// that some instance holds the upstream subscription.
func (s *clusterSubs) join(ctx context.Context, key subKey) error {
	for {
		s.mu.Lock()
		cs := s.keys[key]
		if cs == nil || len(cs.sessions) == 0 {
			s.mu.Unlock()
			return nil
		}
		if cs.nsub != nil && (cs.member || cs.retrying) {
			// Already listening with a lease (the heartbeat keeps both and watches the
			// owner), or with its leases being retried in the background.
			s.mu.Unlock()
			return nil
		}
		wait := cs.joining
		if wait == nil {
			done := make(chan struct{})
			cs.joining = done
			err := s.lead(ctx, cs, key) // unlocks s.mu
			s.mu.Lock()
			cs.joining = nil
			s.mu.Unlock()
			close(done)
			return err
		}
		s.mu.Unlock()
		// Another subscriber of this instance is writing the key's leases: one write of
		// each per instance, not one per subscriber. Subscribers opened together used to
		// send as many lease writes to the JetStream as there were of them, until the
		// first was stored: on a JetStream flooded with session records, thousands.
		select {
		case <-wait:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// lead is join's work for the first subscriber of the key in a while: it listens for the
// key's updates, writes the member lease and makes sure some instance holds the owner
// lease. The caller holds s.mu; lead releases it.
func (s *clusterSubs) lead(ctx context.Context, cs *clusterSub, key subKey) error {
	if cs.nsub == nil {
		nsub, err := s.bus.NC.Subscribe(s.bus.Subject("res", cs.hash), func(m *nats.Msg) {
			pub, _ := strconv.ParseInt(m.Header.Get(receivedHeader), 10, 64)
			s.deliver(key, m.Data, pub)
		})
		if err != nil {
			s.mu.Unlock()
			return err
		}
		cs.nsub = nsub
	}
	s.mu.Unlock()
	// The subscription must be known to the server before the owner can publish.
	if err := s.bus.NC.FlushWithContext(ctx); err != nil {
		return err
	}
	if _, err := s.kv.Put(ctx, s.memberKey(cs), []byte("1")); err != nil {
		// The lease store did not answer (just created, electing a leader, loaded):
		// this instance listens already; the lease is written again soon.
		s.up.log.Warn("cannot write the subscription lease yet", "backend", cs.key.b.cfg.Name, "uri", cs.key.uri, "err", err)
		s.retryLease(cs)
	} else {
		s.mu.Lock()
		cs.member = true
		s.mu.Unlock()
	}
	if err := s.ensureOwner(ctx, cs); err != nil {
		return err
	}
	s.reachHolder(ctx, cs)
	return nil
}

// reachHolder returns once the process holding cs's owner lease (when another one does)
// answered a presence request sent after this instance began listening for the key's
// updates. Flush proves only that our own NATS node has the subscription; its interest
// reaches the other nodes over the routes, where the request follows it. So once the
// holder has answered, the node it publishes on routes its updates here. Without this a
// subscriber whose subscribe was answered could miss the first updates published on
// another node of a cluster (seen on a three-node cluster under load). A holder that
// does not answer in time changes nothing: the presence watch deals with it.
func (s *clusterSubs) reachHolder(ctx context.Context, cs *clusterSub) {
	s.mu.Lock()
	holder := cs.holder
	s.mu.Unlock()
	if holder == "" {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	s.bus.NC.RequestWithContext(ctx, s.aliveSubject(holder), nil)
}

// ensureOwner takes the owner lease if nobody holds it, and subscribes upstream then.
// When another process holds it, its id is noted for the presence watch: reading the
// lease costs the heartbeat what creating it did, and the holder stays current even
// when the lease changes hands between two live instances. When the lease store does
// not answer, the client's subscription stands and the lease is tried again soon
// (retryLease), not only at the next heartbeat. The error is the backend's refusal.
func (s *clusterSubs) ensureOwner(ctx context.Context, cs *clusterSub) error {
	answered, err := s.tryOwner(ctx, cs)
	if !answered {
		s.retryLease(cs)
	}
	return err
}

// ensureOwnerClaimed is ensureOwner for a caller that holds cs.claim.
func (s *clusterSubs) ensureOwnerClaimed(ctx context.Context, cs *clusterSub) error {
	answered, err := s.tryOwnerClaimed(ctx, cs)
	if !answered {
		s.retryLease(cs)
	}
	return err
}

// tryOwner is one attempt of ensureOwner; answered is false when the lease store did not
// answer (a leader election, a loaded server), and nothing is settled.
func (s *clusterSubs) tryOwner(ctx context.Context, cs *clusterSub) (answered bool, err error) {
	if !cs.claim.TryLock() {
		// Another goroutine of this process is taking or finding the lease: its
		// outcome stands for both, and it retries itself if the store did not answer.
		return true, nil
	}
	defer cs.claim.Unlock()
	return s.tryOwnerClaimed(ctx, cs)
}

// tryOwnerClaimed is tryOwner for a caller that holds cs.claim.
func (s *clusterSubs) tryOwnerClaimed(ctx context.Context, cs *clusterSub) (answered bool, err error) {
	s.mu.Lock()
	owner := cs.owner
	s.mu.Unlock()
	if owner {
		return true, nil
	}
	e, err := s.kv.Get(ctx, s.ownerKey(cs))
	if err == nil {
		if string(e.Value()) == s.id {
			// Our own lease, which we do not know we hold: a Create the store applied
			// but whose answer was lost (it timed out on a loaded JetStream). Everyone
			// else reads it as held by a live process, so nobody else would subscribe
			// upstream until it expired. (No other goroutine of ours is taking it:
			// the caller holds cs.claim.)
			return true, s.own(ctx, cs, e.Revision())
		}
		s.setHolder(cs, string(e.Value()))
		return true, nil // another instance holds the upstream subscription
	}
	var rev uint64
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		rev, err = s.kv.Create(ctx, s.ownerKey(cs), []byte(s.id))
		if errors.Is(err, jetstream.ErrKeyExists) {
			return true, nil // taken meanwhile; the next attempt or beat reads by whom
		}
	}
	if err != nil {
		s.up.log.Warn("cannot take the upstream subscription lease yet", "backend", cs.key.b.cfg.Name, "uri", cs.key.uri, "err", err)
		return false, nil
	}
	return true, s.own(ctx, cs, rev)
}

// own subscribes upstream under the owner lease just written at rev, and gives the
// lease back when the backend refuses.
func (s *clusterSubs) own(ctx context.Context, cs *clusterSub, rev uint64) error {
	if err := s.up.subscribe(cs.key, "resources/subscribe", nil); err != nil {
		s.kv.Delete(ctx, s.ownerKey(cs), jetstream.LastRevision(rev))
		return err
	}
	s.mu.Lock()
	cs.owner, cs.ownerRev, cs.holder = true, rev, ""
	s.mu.Unlock()
	return nil
}

// setHolder notes which process holds cs's owner lease.
func (s *clusterSubs) setHolder(cs *clusterSub, id string) {
	s.mu.Lock()
	if !cs.owner {
		cs.holder = id
	}
	s.mu.Unlock()
}

// leave drops this instance's listening and member lease when it has no sessions left
// for the key, and releases the upstream subscription when nobody in the cluster has.
func (s *clusterSubs) leave(ctx context.Context, key subKey) {
	s.mu.Lock()
	cs := s.keys[key]
	if cs == nil || len(cs.sessions) > 0 {
		s.mu.Unlock()
		return
	}
	nsub, member := cs.nsub, cs.member
	cs.nsub, cs.member = nil, false
	s.mu.Unlock()
	if nsub != nil {
		nsub.Unsubscribe()
	}
	if member {
		s.kv.Delete(ctx, s.memberKey(cs))
	}
	s.releaseIfUnused(ctx, cs)
}

// releaseIfUnused gives up an owned upstream subscription once no instance has members.
func (s *clusterSubs) releaseIfUnused(ctx context.Context, cs *clusterSub) {
	s.mu.Lock()
	owner, local := cs.owner, len(cs.sessions)
	s.mu.Unlock()
	if local > 0 {
		return
	}
	if owner {
		if s.othersMember(ctx, cs) {
			return // keep serving the other instances' subscribers
		}
		s.up.subscribe(cs.key, "resources/unsubscribe", nil)
		s.kv.Delete(ctx, s.ownerKey(cs))
		s.bus.NC.Publish(s.bus.Subject("subs", "free", cs.hash), nil)
	}
	s.mu.Lock()
	if len(cs.sessions) == 0 && s.keys[cs.key] == cs && cs.nsub == nil {
		delete(s.keys, cs.key)
	}
	cs.owner = false
	s.mu.Unlock()
}

// othersMember reports whether any instance (but this one) has members for the key.
func (s *clusterSubs) othersMember(ctx context.Context, cs *clusterSub) bool {
	lister, err := s.kv.ListKeysFiltered(ctx, "s."+cs.hash+".m.*")
	if err != nil {
		return !errors.Is(err, jetstream.ErrNoKeysFound)
	}
	defer lister.Stop()
	mine := s.memberKey(cs)
	for k := range lister.Keys() {
		if k != mine {
			return true
		}
	}
	return false
}

// deliver hands an update from NATS to this instance's subscribed sessions.
func (s *clusterSubs) deliver(key subKey, msg []byte, received int64) {
	s.mu.Lock()
	cs := s.keys[key]
	var list []*router.Session
	if cs != nil {
		list = make([]*router.Session, 0, len(cs.sessions))
		for sess := range cs.sessions {
			list = append(list, sess)
		}
	}
	s.mu.Unlock()
	s.up.fanOut(list, msg, received)
}

// receivedHeader carries, on P.res messages, when the owner received the update from the
// backend (unix nanoseconds), for the delivery latency.
const receivedHeader = "Mcp-Received-Ns"

// updated publishes a backend's update once on NATS (only the owner's upstream session
// receives it).
func (s *clusterSubs) updated(b *backend, uri string, msg []byte) {
	m := nats.NewMsg(s.bus.Subject("res", keyHash(subKey{b: b, uri: uri})))
	m.Header.Set(receivedHeader, strconv.FormatInt(time.Now().UnixNano(), 10))
	m.Data = msg
	s.bus.NC.PublishMsg(m)
}

func (s *clusterSubs) dropSession(sess *router.Session) {
	s.mu.Lock()
	var keys []subKey
	for _, key := range s.bySess[sess] {
		if cs := s.keys[key]; cs != nil {
			delete(cs.sessions, sess)
		}
		keys = append(keys, key)
	}
	delete(s.bySess, sess)
	closing := s.closing
	if len(keys) > 0 && !closing {
		s.leaving.Add(1)
	}
	s.mu.Unlock()
	if len(keys) == 0 || closing {
		return
	}
	go func() {
		defer s.leaving.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, k := range keys {
			s.leave(ctx, k)
		}
	}()
}

func (s *clusterSubs) restore(b *backend, c *upConn) {
	s.mu.Lock()
	var keys []subKey
	for key, cs := range s.keys {
		if key.b == b && cs.owner && s.up.held.needs(key, c) {
			keys = append(keys, key)
		}
	}
	s.mu.Unlock()
	for _, key := range keys {
		s.up.subscribe(key, "resources/subscribe", c)
	}
}

func (s *clusterSubs) upstreamCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, cs := range s.keys {
		if cs.owner {
			n++
		}
	}
	return n
}

// heartbeat renews this instance's leases, takes over orphaned upstream subscriptions and
// releases the ones nobody needs any more.
func (s *clusterSubs) heartbeat() {
	defer s.bg.Done()
	period := s.bus.Lease() / 3
	ctxtime.Every(s.stop, period, func() {
		s.mu.Lock()
		list := make([]*clusterSub, 0, len(s.keys))
		for _, cs := range s.keys {
			list = append(list, cs)
		}
		s.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), period)
		defer cancel()
		for _, cs := range list {
			s.renew(ctx, cs)
		}
	})
}

func (s *clusterSubs) renew(ctx context.Context, cs *clusterSub) {
	s.mu.Lock()
	member, owner, rev, local := cs.member, cs.owner, cs.ownerRev, len(cs.sessions)
	s.mu.Unlock()
	if local > 0 {
		if _, err := s.kv.Put(ctx, s.memberKey(cs), []byte("1")); err == nil && !member {
			s.mu.Lock()
			cs.member = true
			s.mu.Unlock()
		}
	}
	if owner {
		nrev, err := s.kv.Update(ctx, s.ownerKey(cs), []byte(s.id), rev)
		if err != nil && (errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyExists)) {
			// The lease expired (we were cut off) and another instance may hold it with
			// its own upstream subscription: ours goes, or every update would be
			// published twice. If nobody took it, the next beat takes it again.
			s.mu.Lock()
			cs.owner = false
			s.mu.Unlock()
			s.up.subscribe(cs.key, "resources/unsubscribe", nil)
			return
		}
		s.mu.Lock()
		if err == nil {
			cs.ownerRev = nrev
		}
		s.mu.Unlock()
		if err != nil {
			return // the store did not answer: keep the subscription, try again next beat
		}
		if local == 0 {
			s.releaseIfUnused(ctx, cs)
		}
		return
	}
	if local > 0 {
		if err := s.ensureOwner(ctx, cs); err != nil {
			s.up.log.Warn("cannot take over an upstream subscription", "backend", cs.key.b.cfg.Name, "uri", cs.key.uri, "err", err)
		}
	}
}

// close stops the heartbeat and gives up this instance's leases at once, so that other
// instances take the upstream subscriptions over without waiting for the leases to
// expire (an instance that dies instead lets them expire). Calls after the first wait
// for it and do nothing more.
func (s *clusterSubs) close() { s.closeOnce.Do(s.closeNow) }

func (s *clusterSubs) closeNow() {
	close(s.stop)
	s.bg.Wait()
	<-s.retries.Zero()
	s.mu.Lock()
	s.closing = true
	s.mu.Unlock()
	ctxtime.WaitGroup(&s.leaving, 10*time.Second)
	s.mu.Lock()
	var owned, member []*clusterSub
	for _, cs := range s.keys {
		if cs.owner {
			owned = append(owned, cs)
		}
		if cs.member {
			member = append(member, cs)
		}
		if cs.nsub != nil {
			cs.nsub.Unsubscribe()
			cs.nsub = nil
		}
	}
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, cs := range member {
		s.kv.Delete(ctx, s.memberKey(cs))
	}
	for _, cs := range owned {
		s.kv.Delete(ctx, s.ownerKey(cs), jetstream.LastRevision(cs.ownerRev))
		s.bus.NC.Publish(s.bus.Subject("subs", "free", cs.hash), nil)
	}
	// Gone from presence only now: the leases above are released already, so nobody
	// races to take them over from a live instance.
	s.alive.Unsubscribe()
	s.bus.NC.Flush()
}

// onFree: an owner gave an upstream subscription up; an instance with subscribers for
// it takes it over now rather than at its next heartbeat.
func (s *clusterSubs) onFree(m *nats.Msg) {
	hash := m.Subject[strings.LastIndexByte(m.Subject, '.')+1:]
	s.mu.Lock()
	var cs *clusterSub
	for _, c := range s.keys {
		if c.hash == hash && len(c.sessions) > 0 {
			cs = c
		}
	}
	s.mu.Unlock()
	if cs == nil {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.ensureOwner(ctx, cs); err != nil {
			s.up.log.Warn("cannot take over an upstream subscription", "backend", cs.key.b.cfg.Name, "uri", cs.key.uri, "err", err)
		}
	}()
}

func (s *clusterSubs) list(sess *router.Session) []subKey {
	s.mu.Lock()
	defer s.mu.Unlock()
	return listOf(s.bySess, sess)
}

// addLocked records sess as a subscriber of key and returns key's entry; the caller
// holds s.mu.
func (s *clusterSubs) addLocked(sess *router.Session, key subKey) *clusterSub {
	cs := s.keys[key]
	if cs == nil {
		cs = &clusterSub{key: key, only: keySet{key}, hash: keyHash(key), sessions: map[*router.Session]struct{}{}}
		s.keys[key] = cs
	}
	cs.sessions[sess] = struct{}{}
	s.bySess.add(sess, key, cs.only)
	return cs
}

func (s *clusterSubs) resubscribe(sess *router.Session, keys []subKey) {
	s.mu.Lock()
	for _, key := range keys {
		s.addLocked(sess, key)
	}
	s.mu.Unlock()
	// Synchronously: the session's first request on this instance must find its
	// subscriptions delivering.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, key := range keys {
		if err := s.join(ctx, key); err != nil {
			s.up.log.Warn("cannot restore a subscription", "backend", key.b.cfg.Name, "uri", key.uri, "err", err)
		}
	}
}
