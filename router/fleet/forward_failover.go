package fleet

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/mcprouter/mcprouter/transport/upstream"
)

// A replica that dies with requests in flight, over a connection whose answers come
// apart from the send (upstream.AnswersApart: a stdio child killed, a legacy SSE
// stream cut): no Send is left to see the loss and send them again, as an HTTP
// exchange's does (forward). failover does it for them when the connection is lost,
// under the same rules (forward_retry.go): the backend may have run them, so each goes
// to another replica once, and only when running it twice does no harm and nothing of
// its has come back.

// A request that moves from a 2026-07-28 client's session (by declared capabilities,
// or its principal's) goes on the other replica's session declaring the same
// capabilities (sessionLike), which may not be open yet, and failover must not wait on
// the connection's reader: the requests are moved at once to a stand-in of that
// session (standIn), so that connLost, which fails what stays on c, leaves them be;
// the session is opened on failover's goroutine, and they move on to it, or fail
// saying why when it cannot be had. They never go on the shared session.

// moved is a request failover moved to another replica, with the bytes to send there.
type moved struct {
	id       uint64
	to       *upConn
	bp       *[]byte
	deadline int64
}

// failover moves the requests in flight on c, which died with cause, to another
// replica where resend allows, and sends them there on a goroutine of its own (connLost
// is called from the connection's reader, which must not block). What stays on c is
// failed by connLost.
func (fw *forwarder) failover(c *upConn, cause error) {
	if !upstream.AnswersApart(c.conn) || fw.life.ended() {
		return
	}
	if cause == nil {
		cause = errors.New("connection lost")
	}
	lost := fmt.Errorf("%w: %s: %w", upstream.ErrNoResponse, c.b.cfg.Name, cause)
	var out []moved
	var stands []*upConn // the stand-ins of sessions to open, one per instance
	for _, id := range fw.table.sentOn(c, nil) {
		m := moved{id: id}
		if to, _ := fw.resend(c.b, c, id, lost, func(e *entry, to *upConn) {
			m.bp, m.deadline = wireFor(to, e), e.deadline
		}, func(in *instance) (*upConn, error) {
			if c2, _ := fw.sessions.sessionLike(nil, c, in, false); c2 != nil || !c.scoped() {
				return c2, nil
			}
			for _, s := range stands {
				if s.inst == in {
					return s, nil
				}
			}
			s := standIn(c, in)
			stands = append(stands, s)
			return s, nil
		}); to != nil {
			m.to = to
			out = append(out, m)
		}
	}
	if len(out) == 0 {
		return
	}
	fw.life.spawn(func() {
		for _, s := range stands {
			fw.openStandIn(c, s, lost, out)
		}
		for _, m := range out {
			if m.to == nil { // failed or settled while its stand-in's session opened
				continue
			}
			ctx, cancel := context.WithDeadline(fw.life.ctx, time.Unix(0, m.deadline))
			err := m.to.conn.Send(ctx, *m.bp)
			cancel()
			putBuf(m.bp)
			if err != nil {
				if errors.Is(err, upstream.ErrNoResponse) {
					err = mayHaveRun(err, true, "it was sent to a second replica already")
				}
				fw.sendFailed(c.b, m.to, m.id, err)
			}
		}
	})
}

// standIn is an upConn that holds, for failover, the requests bound for the session
// like c (sessionLike) with instance in while it is opened: it speaks for the same
// clients and sends nothing (a cancellation told to it is lost with the request).
func standIn(c *upConn, in *instance) *upConn {
	return &upConn{via: c.via, b: c.b, inst: in, owner: c.owner, caps: c.caps, modern: c.modern, conn: opening{}}
}

// openStandIn opens the session stand-in s stands for (sessionLike of c), within the
// latest deadline of the requests in out waiting on it, and moves them on to it. When
// it cannot be had they fail, with lost (why they left c) and why not; their m.to is
// then nil, as it is for those settled meanwhile (cancelled, expired, the fleet closing).
func (fw *forwarder) openStandIn(c, s *upConn, lost error, out []moved) {
	var dl int64
	for _, m := range out {
		if m.to == s {
			dl = max(dl, m.deadline)
		}
	}
	ctx, cancel := context.WithDeadline(fw.life.ctx, time.Unix(0, dl))
	c2, err := fw.sessions.sessionLike(ctx, c, s.inst, true)
	cancel()
	if err == nil && (c2 == nil || c2.modern != c.modern) {
		err = errors.New("the replica now speaks another protocol revision")
	}
	for i := range out {
		m := &out[i]
		if m.to != s {
			continue
		}
		if err == nil && fw.table.rebind(m.id, s, c2, func(*entry) bool { return true }) {
			m.to = c2
			continue
		}
		if err != nil {
			fw.sendFailed(c.b, c, m.id, noLike(lost, true, s.inst, err)) // c, not s: lost's replica was down
		}
		putBuf(m.bp)
		m.to = nil
	}
}

// opening is the upstream.Conn of a stand-in (standIn): nothing goes through it, and
// it is never dead (Done is nil) while its session opens.
type opening struct{}

// errStandIn is what a send on a stand-in gets: only a cancellation is sent there, and
// the request it is about ends with it.
var errStandIn = fmt.Errorf("%w: its session on another replica is being opened", upstream.ErrBackendDown)

func (opening) Send(context.Context, []byte) error { return errStandIn }
func (opening) SetProtocolVersion(string)          {}
func (opening) Close() error                       { return nil }
func (opening) Done() <-chan struct{}              { return nil }
func (opening) Err() error                         { return nil }

// sentOn appends to out the ids of the client requests sent on c and not settled.
func (t *table) sentOn(c *upConn, out []uint64) []uint64 {
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		for id, e := range sh.m {
			if e.conn == c && e.kind == clientRequest && e.state == stateSent {
				out = append(out, id)
			}
		}
		sh.mu.Unlock()
	}
	return out
}
