package transport

import (
	"sync"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/transport/budget"
)

// unit is one inbound message or batch on a transport whose replies travel on the
// session's own channel (legacy SSE, stdio) rather than on the request that carried them.
// Its bytes are copied, so the reader may go on at once.
type unit struct {
	call    call
	sess    *Session
	pending *counter // told when the unit is released (stdio waits for it at EOF)
	elems   [][]byte
	xs      []*Exchange // the exchanges of elems, while dispatch hands them over
	tmp     []byte
}

var unitPool = sync.Pool{New: func() any { return new(unit) }}

func getUnit() *unit { return unitPool.Get().(*unit) }

func putUnit(u *unit) {
	u.sess = nil
	clear(u.elems)
	u.elems = u.elems[:0]
	if cap(u.call.buf) > maxPooledBuf {
		u.call.buf = nil
	}
	unitPool.Put(u)
}

// dispatch hands every element to h; invalid elements are answered with their error.
//
// Every exchange is registered and the call sealed before the first is handed over, so
// the replies go out as soon as the last exchange is answered, synchronously inside its
// x.Reply: a handler that answers and then ends the session (a shutdown request) does
// not lose its answer to the session's closing.
func (u *unit) dispatch(h Handler, kind Kind, version string, batch bool) {
	u.dispatchTo(u, h, kind, version, batch)
}

// dispatchTo is dispatch with the call's replies going to out (a transport whose
// replies travel otherwise, as NATS request replies do).
func (u *unit) dispatchTo(out output, h Handler, kind Kind, version string, batch bool) {
	c := &u.call
	c.init(out, batch)
	u.sess.beginCall() // ended when the unit is released
	u.xs = u.xs[:0]
	for range u.elems {
		x := newExchange()
		c.add(x)
		u.xs = append(u.xs, x)
	}
	c.seal()
	for i, e := range u.elems {
		x := u.xs[i]
		x.own = append(x.own[:0], e...)
		x.Raw = x.own
		if err := codec.Scan(x.Raw, &x.Msg); err != nil {
			code, msg, data := ErrorParts(err, nil)
			u.tmp = codec.AppendError(u.tmp[:0], nil, code, msg, data)
			x.Reply(u.tmp)
			continue
		}
		x.Session, x.Version, x.Transport, x.Batch = u.sess, version, kind, batch
		if v := u.sess.Version(); v != "" {
			x.Version = v
		}
		h.HandleMessage(x)
	}
	clear(u.xs) // handed over: the unit must not keep them
	c.unref()
}

func (u *unit) finish(c *call) {
	if len(c.ends) == 0 {
		return
	}
	u.tmp = c.appendBody(u.tmp[:0])
	if u.sess.Send(u.tmp) == budget.ErrOverBudget {
		u.sess.Send(overBudgetReply(u.tmp))
	}
}

func (u *unit) related(c *call, msg []byte) (bool, error) { return false, u.sess.Send(msg) }

func (u *unit) streamed(*call, []byte, bool) {}

func (u *unit) bind(c *call, version string, state SessionState) (*Session, error) {
	return u.sess, u.sess.setState(version, state)
}

func (u *unit) released(*call) {
	u.sess.endCall()
	if p := u.pending; p != nil {
		u.pending = nil
		putUnit(u)
		p.done()
		return
	}
	putUnit(u)
}
