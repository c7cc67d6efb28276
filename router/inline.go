package router

import (
	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/transport"
)

// runsOnCaller reports whether x's job may be dispatched with workers.DispatchRun,
// which on an idle shard runs the forward on the calling goroutine instead of a pool
// worker. Config.RunOnCaller must be set, and that is only right where the caller would
// do nothing but wait for the answer and nothing the answer depends on needs that
// goroutine meanwhile:
//
//   - a request (a notification or response is not waited for: its 202 would wait);
//   - on Streamable HTTP, alone in its POST: stdio and a message bus read one
//     connection's messages in one loop, which would run them one at a time, and the
//     elements of a batch would run one after another;
//   - of a session, not a stateless request: a stateless request's goroutine turns the
//     POST into an event stream when the answer is slow (StatelessStreamAfter), which it
//     could not do while running the forward;
//   - of a client that can be asked nothing (no sampling, roots, elicitation or tasks
//     declared): a backend's request to the client goes out on the POST's event stream,
//     which this goroutine serves only once the forward returns, while the forward
//     waits for the client's answer. The fleet refuses those requests to a client that
//     did not declare them (and answers pings itself: Config.RunOnCaller).
//
// What else the forward sends on the POST (progress, logging) still reaches the client,
// with the answer instead of before it.
func (r *Router) runsOnCaller(x *transport.Exchange) bool {
	if !r.cfg.RunOnCaller || x.Msg.Kind != codec.KindRequest || x.Carrier != transport.CarrierStreamable || x.Batch || x.Stateless {
		return false
	}
	s := sessionOf(x.Session)
	return s != nil && !s.stateless && !s.mayAsk()
}

// asking caches, per session, whether its client declared a capability a backend can
// ask it for (mayAsk): 0 not yet known, then askNothing or askSomething. Its
// capabilities do not change after initialize.
const (
	askNothing uint32 = iota + 1
	askSomething
)

// mayAsk reports whether the client declared sampling, roots, elicitation or tasks,
// the capabilities under which a backend may send it a request.
func (s *Session) mayAsk() bool {
	switch s.asking.Load() {
	case askNothing:
		return false
	case askSomething:
		return true
	}
	v := askNothing
	var w codec.Walker
	if w.Object(s.clientCaps) {
		for key, _, _, ok := w.Next(); ok; key, _, _, ok = w.Next() {
			switch string(key) {
			case "sampling", "roots", "elicitation", "tasks":
				v = askSomething
			}
		}
	} else if len(s.clientCaps) > 0 {
		v = askSomething // not an object we can read: assume the worst
	}
	s.asking.Store(v)
	return v == askSomething
}
