package router

import (
	"errors"
	"sync"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/transport"
	"github.com/mcprouter/mcprouter/workers"
)

// job carries one exchange through the dispatcher. Pooled: the steady state allocates
// nothing per message.
type job struct {
	r   *Router
	x   *transport.Exchange
	s   *Session
	buf []byte
	fwd bool // Prepare handed the exchange to the fleet's Run
	// start is when the router received the message (Now), set when someone observes.
	start int64
}

var jobPool = sync.Pool{New: func() any { return new(job) }}

func getJob() *job { return jobPool.Get().(*job) }

func (j *job) release() {
	j.r, j.x, j.s, j.fwd, j.start = nil, nil, nil, false, 0
	if cap(j.buf) > 64<<10 {
		j.buf = nil
	}
	jobPool.Put(j)
}

// Prepare runs on the shard goroutine, in the session's order: lifecycle methods and
// notifications are handled here entirely, so that an initialized or cancelled
// notification always takes effect before the next message of the session is looked at.
func (j *job) Prepare() bool {
	x := j.x
	j.s = sessionOf(x.Session)
	if j.s != nil && j.s.t.Load() == nil {
		j.s.t.Store(x.Session) // a session adopted from another instance
	}
	j.r.logReceived(x)
	if j.r.handle(j) {
		j.release()
		return false
	}
	j.fwd = true
	return true
}

// Run forwards the exchange on a pool worker.
func (j *job) Run() {
	j.r.fleet.Run(j.s, j.x)
	j.release()
}

// Fail answers a request the dispatcher could not run (overload, shutdown, panic).
func (j *job) Fail(err error) { j.fail(err) }

func (j *job) fail(err error) {
	x := j.x
	if x == nil { // a panic after the exchange was answered
		return
	}
	if x.Msg.Kind == codec.KindRequest {
		code, msg, data := j.r.errs.errorOf(err)
		j.buf = codec.AppendError(j.buf[:0], x.Msg.ID, code, msg, data)
		if errors.Is(err, workers.ErrOverloaded) || errors.Is(err, workers.ErrClosed) {
			j.observe(OutcomeOverloaded)
		} else {
			j.observe(OutcomeError)
		}
		x.Reply(j.buf)
	} else {
		if errors.Is(err, workers.ErrOverloaded) {
			j.r.Stats.Dropped.Add(1)
		}
		x.Done()
	}
	j.release()
}

// reply answers the job's request with a result and finishes it.
func (j *job) reply(result []byte) {
	j.buf = codec.AppendResult(j.buf[:0], j.x.Msg.ID, result)
	j.observe(OutcomeOK)
	j.x.Reply(j.buf)
	j.x = nil
}

// replyError answers the job's request with an error and finishes it.
func (j *job) replyError(code int, msg string, data []byte) {
	j.buf = codec.AppendError(j.buf[:0], j.x.Msg.ID, code, msg, data)
	j.observe(OutcomeError)
	j.x.Reply(j.buf)
	j.x = nil
}

// done finishes a notification or response.
func (j *job) done() {
	j.x.Done()
	j.x = nil
}
