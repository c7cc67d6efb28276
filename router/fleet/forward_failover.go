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
	for _, id := range fw.table.sentOn(c, nil) {
		m := moved{id: id}
		if to, _ := fw.resendBuilding(c.b, c, id, lost, func(e *entry, to *upConn) {
			m.bp, m.deadline = wireFor(to, e), e.deadline
		}); to != nil {
			m.to = to
			out = append(out, m)
		}
	}
	if len(out) == 0 {
		return
	}
	fw.life.spawn(func() {
		for _, m := range out {
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
