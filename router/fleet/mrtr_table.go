package fleet

import (
	"github.com/mcprouter/mcprouter/router"
	"github.com/mcprouter/mcprouter/transport"
)

// The in-flight table's side of parked requests (mrtr.go): a stateless client's request
// whose exchange was answered with input_required stays in the table, out of the client
// index, until a retry claims it or its wait ends.

// park moves the sent stateless client request id to parked when may (called under the
// shard lock) allows it, and returns its exchange, which the caller answers; nil when
// id is not such a request.
func (t *table) park(id uint64, may func(e *entry) bool) *transport.Exchange {
	sh := t.shard(id)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e := sh.m[id]
	if e == nil || e.state != stateSent || e.kind != clientRequest || e.x == nil || !e.x.Stateless || !may(e) {
		return nil
	}
	sh.unindex(e)
	x := e.x
	e.state, e.x, e.sess = stateParked, nil, nil
	e.clientID, e.clientHash = "", 0
	e.progress, e.origToken = false, nil // views into x's bytes
	return x
}

// claim gives parked request id to the retry x of stateless session s, which the router
// received at start (0: no Observer): it is sent again, with a fresh deadline, indexed
// under the retry's id. false when it is no longer parked.
func (t *table) claim(id uint64, s *router.Session, x *transport.Exchange, start int64) bool {
	return t.withParked(id, func(sh *tableShard, e *entry) {
		e.x, e.sess, e.state = x, s, stateSent
		e.deadline = deadlineIn(e.backend.cfg.Timeout)
		e.start, e.sent, e.recv = start, 0, 0 // the retry's timings: the Observer sees router time
		if tok := x.Msg.ProgressToken; tok != nil {
			e.progress, e.origToken = true, tok
		}
		if len(x.Msg.ID) > 0 {
			e.clientID = string(x.Msg.ID)
			e.clientHash = clientHash(s, e.clientID)
			e.sameHash = sh.byClient[e.clientHash]
			sh.byClient[e.clientHash] = e
		}
		x.Tag = e
	})
}

// takeParked settles parked request id as expired and returns it; nil when it is not
// parked.
func (t *table) takeParked(id uint64) *entry {
	var taken *entry
	t.withParked(id, func(sh *tableShard, e *entry) {
		sh.settle(e, stateExpired)
		taken = e
	})
	return taken
}

// parked reports whether request id is parked.
func (t *table) parked(id uint64) bool {
	return t.withParked(id, func(*tableShard, *entry) {})
}

// withParked calls fn with parked request id and its shard, under the shard's lock (as
// with does for a sent request): the one lookup of claim, takeParked and parked, so
// that only a parked entry moves out of parked. fn must not block. false when id is
// not parked.
func (t *table) withParked(id uint64, fn func(sh *tableShard, e *entry)) bool {
	sh := t.shard(id)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e := sh.m[id]
	if e == nil || e.state != stateParked {
		return false
	}
	fn(sh, e)
	return true
}
