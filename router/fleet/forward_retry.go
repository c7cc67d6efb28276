package fleet

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/transport/upstream"
)

// Sending a request again on another replica, as a careful gateway does (haproxy's
// retry-on conn-failure and empty-response, HTTP proxies' idempotency rules):
//
//   - the instance refused the message (upstream.ErrBackendDown: connection refused,
//     process down, 502-504): the backend did not process it, so any request may go to
//     another replica;
//   - the connection closed before any byte of the answer (upstream.ErrNoResponse: a
//     replica killed mid-request, its connections dropped): the backend may have run
//     it, so it goes to another replica only when running it twice does no harm: a
//     method that only reads (upstream.RetrySafe: resources/read, prompts/get,
//     completion/complete, ...), or a tools/call whose tool is annotated readOnlyHint
//     or idempotentHint (catalog_hints.go), and only while no message of the backend's
//     about it has come (entry.heard: its client may have heard of it).
//
// Once, never on a 2025 client's own upstream session (its state lives on that instance
// alone), and only to a replica of the same era (the bytes were built for it). The
// session it goes on there speaks for the same clients as the one it left (sessionLike):
// another replica's shared session for a shared one; for a 2026-07-28 client's session
// by declared capabilities, or its principal's, that replica's session declaring the
// same capabilities (for the same principal), opened on demand under the same bounds.
// Never the shared session in their stead: it declares the router's capabilities, and
// the second replica would judge the client by capabilities it never declared
// (sessions_caps.go). When no such session can be had, the request fails and the error
// says why.

// resendBuilding finds where request id, whose send on c failed with err, goes next:
// the connection of another replica it was moved to, or nil and the error to answer
// with (err, saying why it was not sent again when the request may have run), or nil
// and no error when the request is no longer on c: settled, or moved by failover (a
// legacy SSE replica's POST and its event stream fail together), whose holder answers
// it. build,
// when set, is called with the entry and the connection it moves to while it moves
// (under its shard's lock): the last moment its exchange may be read, to build the
// bytes sent again when the caller no longer has them. It may wait, within the
// request's deadline, for the session on the other replica to open: forward calls it
// on a dispatcher worker, where the request's first session was opened too.
func (fw *forwarder) resendBuilding(b *backend, c *upConn, id uint64, err error, build func(e *entry, to *upConn)) (*upConn, error) {
	dl := fw.table.sentDeadline(id, c)
	if dl == 0 {
		return nil, nil
	}
	c2, err := fw.resend(b, c, id, err, build, func(in *instance) (*upConn, error) {
		ctx, cancel := context.WithDeadline(fw.life.ctx, time.Unix(0, dl))
		defer cancel()
		return fw.sessions.sessionLike(ctx, c, in, true)
	})
	if c2 == nil && fw.table.sentDeadline(id, c) == 0 {
		return nil, nil // moved or settled while the session there opened
	}
	return c2, err
}

// resend is resendBuilding with the session on the other replica found by to (which
// returns nil and no error when there is none to move to).
func (fw *forwarder) resend(b *backend, c *upConn, id uint64, err error, build func(e *entry, to *upConn), to func(in *instance) (*upConn, error)) (*upConn, error) {
	// Lost before down: a request lost on a replica that died (failover's error wraps
	// the child's exit, a down error) was sent, and may have run.
	lost := errors.Is(err, upstream.ErrNoResponse)
	down := !lost && errors.Is(err, upstream.ErrBackendDown)
	if !down && !lost {
		return nil, err
	}
	if c.owner != nil && !c.owner.Stateless() || b.cfg.PerClient && c.owner == nil {
		return nil, mayHaveRun(err, lost, "the client's own upstream session lives on that instance")
	}
	if down {
		c.inst.healthy.Store(false)
	}
	in := b.pickOther(c.inst)
	if in == nil {
		return nil, mayHaveRun(err, lost, "no other replica is available")
	}
	c2, oerr := to(in)
	if oerr != nil {
		return nil, noLike(err, lost, in, oerr)
	}
	if c2 == nil || c2.modern != c.modern {
		return nil, mayHaveRun(err, lost, "no other replica is available")
	}
	why := ""
	if !fw.table.rebind(id, c, c2, func(e *entry) bool {
		if lost {
			why = fw.whyNotRepeat(e)
		}
		if why == "" && build != nil {
			build(e, c2)
		}
		return why == ""
	}) {
		if why == "" { // settled meanwhile: whoever did answered it
			return nil, err
		}
		return nil, mayHaveRun(err, lost, why)
	}
	fw.stats.Failovers.Add(1)
	return c2, nil
}

// noLike is the error of a request that failed with err and found no session like
// its own on replica in (sessionLike failed with why).
func noLike(err error, lost bool, in *instance, why error) error {
	return mayHaveRun(fmt.Errorf("%w (and replica %s could not open a session declaring the client's capabilities: %w)", err, in.dialer.Addr, why),
		lost, "no other replica had a session for it")
}

// sentDeadline returns the deadline of client request id sent on c, 0 once it is
// settled or moved.
func (t *table) sentDeadline(id uint64, c *upConn) int64 {
	sh := t.shard(id)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if e := sh.m[id]; e != nil && e.state == stateSent && e.kind == clientRequest && e.conn == c {
		return e.deadline
	}
	return 0
}

// whyNotRepeat says why sent request e, which the backend may have run, must not be
// run again; "" when it may. It reads e's exchange: call it under e's shard lock.
func (fw *forwarder) whyNotRepeat(e *entry) string {
	if e.heard {
		return "the backend had already sent messages about it"
	}
	m := &e.x.Msg
	if m.Flags&codec.MethodEscaped == 0 && string(m.Method) == "tools/call" {
		name := m.Name
		if m.Flags&codec.NameEscaped != 0 {
			name, _ = codec.Unquote(nil, m.Name)
		}
		if r, ok := fw.catalog.load().tools[string(name)]; ok && r.b == e.backend && r.repeatable {
			return ""
		}
		return "tool " + strconv.Quote(string(name)) + " is not annotated readOnlyHint or idempotentHint"
	}
	if upstream.RetrySafe(m) {
		return ""
	}
	return string(m.Method) + " is not known to be safe to repeat"
}

// pickOther picks a usable instance of b other than not, where a request that failed
// on not goes: pick's choice when it is another, else the first other usable one.
func (b *backend) pickOther(not *instance) *instance {
	if in := b.pick(); in != nil && in != not {
		return in
	}
	for _, in := range b.instances {
		if in != not && in.usable() {
			return in
		}
	}
	return nil
}

// notRepeated is the error of a request that may have run and was not sent again.
type notRepeated struct {
	err error
	why string
}

// mayHaveRun is err, saying why the request was not sent again when the backend may
// have run it (lost); err itself otherwise.
func mayHaveRun(err error, lost bool, why string) error {
	if !lost {
		return err
	}
	return &notRepeated{err: err, why: why}
}

func (e *notRepeated) Error() string {
	return "the request may have run: the connection closed before any byte of its answer, and it was not sent again (" +
		e.why + "): " + e.err.Error()
}

func (e *notRepeated) Unwrap() error { return e.err }
