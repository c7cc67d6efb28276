package router

import (
	"time"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/transport"
)

// CallerFleet is a Fleet that can forward some requests on the goroutine that received
// them (Config.RunOnCaller), saving the hand-off to a pool worker and back.
type CallerFleet interface {
	// RunsOnCaller is asked right after a Prepare that returned true, in the session's
	// order, and must be as quick. It reports whether Run(s, x) may run on the
	// request's own goroutine, which serves nothing else of the request until Run
	// returns: true only when Run returns once the backend's answer is in, or its
	// event stream is handed to a goroutine of its own (the request's progress, logs
	// and server-to-client requests travel on that stream, which the request's
	// goroutine must serve), and within the time the transport waits for the answer
	// (within, HTTPConfig.ReplyTimeout), so that a backend that does not answer meets
	// the same end as it would on a worker.
	RunsOnCaller(s *Session, x *transport.Exchange, within time.Duration) bool
}

// runsOnCaller reports whether x's job may be dispatched with workers.DispatchRun, which
// on an idle shard runs the forward on the calling goroutine instead of a pool worker
// (the CallerFleet then decides, once the job is prepared: job.RunsOnCaller). Only
// where the caller would do nothing but wait for the answer:
//
//   - a request (a notification or response is not waited for: its 202 would wait);
//   - on Streamable HTTP, alone in its POST: stdio and a message bus read one
//     connection's messages in one loop, which would run them one at a time, and the
//     elements of a batch would run one after another;
//   - of a session, or stateless: a stateless request's goroutine turns the POST into
//     an event stream when the answer is slow (StatelessStreamAfter), so that the
//     client's closing of the connection cancels it; while it runs the forward, the
//     transport watches the connection for that instead (Exchange.WatchOnCaller, asked
//     once the fleet has said yes).
//
// Messages that reach the request by another way while its forward runs on the caller
// (a backend's progress or log sent on its GET stream instead of the POST's reply) are
// queued on the POST's stream as on a worker, and go out once the forward has returned:
// later than they would from a worker, never lost. A backend's request to the client
// sent that way would wait for the forward's end, which waits for the backend: until
// the request's deadline. The specification sends both on the request's own stream,
// which the CallerFleet hands off.
func (r *Router) runsOnCaller(x *transport.Exchange) bool {
	if r.inline == nil || x.Msg.Kind != codec.KindRequest || x.Carrier != transport.CarrierStreamable || x.Batch {
		return false
	}
	if x.Stateless {
		return true
	}
	s := sessionOf(x.Session)
	return s != nil && !s.Stateless()
}

// RunsOnCaller implements workers.CallerRunner: the fleet's say, once prepared, for a
// job dispatched with DispatchRun (runsOnCaller), and for a stateless request the
// transport's, which then watches its connection while the forward runs.
func (j *job) RunsOnCaller() bool {
	return j.fwd && j.r.inline != nil && j.r.inline.RunsOnCaller(j.s, j.x, j.r.cfg.ReplyTimeout) &&
		(!j.x.Stateless || j.x.WatchOnCaller())
}
