package transport

import (
	"sync"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/internal/ctxtime"
	"github.com/mcprouter/mcprouter/transport/budget"
)

// unit is one inbound message or batch on a transport whose replies travel on the
// session's own channel (legacy SSE, stdio) rather than on the request that carried them.
// Its bytes are copied, so the reader may go on at once.
type unit struct {
	call    call
	sess    *Session
	pending *ctxtime.Counter // told when the unit is released (stdio waits for it at EOF)
	in      inbound
	tmp     []byte
	trace   TraceHeaders // a legacy HTTP+SSE POST's (HTTPConfig.TraceHeaders)
}

var unitPool = sync.Pool{New: func() any { return new(unit) }}

func getUnit() *unit { return unitPool.Get().(*unit) }

func putUnit(u *unit) {
	u.sess = nil
	u.trace.forget()
	u.in.reset()
	if cap(u.call.buf) > maxPooledBuf {
		u.call.buf = nil
	}
	unitPool.Put(u)
}

// begin starts the unit's call, whose replies go to out (the unit itself, or a transport
// whose replies travel otherwise, as NATS request replies do). The session counts the
// call as in flight until the unit is released.
func (u *unit) begin(out output, batch bool) {
	u.call.init(out, batch)
	u.sess.beginCall()
}

// dispatch hands the unit's scanned elements over (inbound.handOff) and lets go of the
// unit: it is released once every exchange is.
func (u *unit) dispatch(out output, h Handler, to arrival) {
	u.begin(out, to.batch)
	u.in.handOff(&u.call, h, to, &u.tmp)
	u.call.unref()
}

// handOne hands one element of a batch that is still arriving to h (stdio), or answers
// it with err, the error the element got before it could be scanned.
func (u *unit) handOne(h Handler, e []byte, err error) {
	x := newExchange()
	u.call.add(x)
	if cap(u.in.msgs) == 0 {
		u.in.msgs = make([]codec.Message, 1)
	}
	u.in.msgs = u.in.msgs[:1] // so that putUnit clears it
	m := &u.in.msgs[0]
	if err == nil {
		err = scanElement(e, m)
	}
	handOver(h, x, e, m, err, arrival{sess: u.sess, version: u.sess.Version(), carrier: CarrierStdio, batch: true}, &u.tmp)
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
		p.Done()
		return
	}
	putUnit(u)
}
