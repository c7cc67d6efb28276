package fleet

import (
	"bytes"
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/router"
	"github.com/mcprouter/mcprouter/router/modern"
	"github.com/mcprouter/mcprouter/transport"
)

// A 2025-era client in front of a 2026-07-28 backend (issue 12's translation, the way
// back from mrtr.go): the backend has no server-to-client requests and answers the
// client's request with an input_required result instead. The client knows nothing of
// that, so the router asks it the 2025 way: each of the result's inputRequests becomes
// an ordinary server-to-client request on the client's session (on the stream of the
// request that caused it, like a 2025 backend's, through serverRequests), the answers
// are collected, and the original request goes to the backend again with
// inputResponses and the requestState it echoes (modern.AppendRetry) under a fresh
// upstream id. A backend that asks again gets another round, up to maxInputRounds.
//
// The client's request keeps its exchange throughout: between rounds the reversal owns
// it (gather), during a retry the in-flight table does (an ordinary entry, which
// progress, cancellation and timeouts find as usual). A client that did not declare
// the capability an input request needs is answered an error saying which; the
// client's cancellation ends a round's wait (cancel) and, during a retry, the retry.

// maxInputRounds bounds the input_required rounds of one client request: a backend
// that keeps asking (a loop, or an answer it never accepts) ends in an error, not in
// questions without end.
const maxInputRounds = 8

// maxInputRequests bounds the input requests of one round.
const maxInputRequests = 16

// reversals is the book of client requests being translated. Who calls it: input from
// backendResponse on an upstream connection's reader goroutine, gather on a goroutine
// of the fleet's lifecycle (one per round), cancel from the forwarder's cancel (the
// session's order). A nil *reversals translates nothing. Its lock is held for no I/O.
type reversals struct {
	fw    *forwarder
	srv   *serverRequests
	count atomic.Int64 // len(byEntry) + rounds gathering: input's fast path skips the lock at 0
	// urlIDs numbers the elicitationIds of URL-mode elicitations (withElicitationID).
	urlIDs atomic.Uint64

	mu sync.Mutex
	// byEntry finds a request whose retry is upstream by the retry's entry id (ids are
	// never reused, so a retry settled some other way leaves a stale record that no
	// answer finds; sweepLocked drops it once the retry's deadline has passed).
	byEntry map[uint64]*reversal
	// gathering holds the requests whose round is waiting for the client's answers.
	gathering map[*reversal]struct{}
}

// reversal is one client request across its rounds.
type reversal struct {
	sess     *router.Session
	x        *transport.Exchange // owned by the reversal only while it gathers
	b        *backend
	strip    int
	clientID string // x's request id, for cancel
	rounds   int
	start    int64 // when the router received the request (Observer)

	// Under reversals.mu.
	stop      context.CancelFunc // ends the round's wait; nil while a retry is upstream
	cancelled bool
	expires   int64 // unix nanoseconds: the retry upstream has surely settled by then
}

// inputRequest is one entry of a backend's inputRequests, copied out of its answer.
type inputRequest struct {
	key    []byte // raw contents (escapes intact)
	method string
	params []byte
}

func newReversals(fw *forwarder, srv *serverRequests) *reversals {
	return &reversals{fw: fw, srv: srv, byEntry: map[uint64]*reversal{}, gathering: map[*reversal]struct{}{}}
}

// input takes a 2026-07-28 backend's answer m on c to a 2025 client's request e (taken
// from the table): an input_required result starts (or continues) the request's
// rounds and true is returned; anything else ends them and is answered as usual.
func (r *reversals) input(c *upConn, e *entry, m *codec.Message) bool {
	if r == nil {
		return false
	}
	if m.Kind != codec.KindResult || string(modern.ReadResultType(m.Result)) != modern.ResultInputRequired {
		if r.count.Load() > 0 {
			r.mu.Lock()
			if _, ok := r.byEntry[e.id]; ok {
				delete(r.byEntry, e.id)
				r.count.Add(-1)
			}
			r.mu.Unlock()
		}
		return false
	}
	now := time.Now().UnixNano()
	r.mu.Lock()
	rv := r.byEntry[e.id]
	if rv != nil {
		delete(r.byEntry, e.id)
		r.count.Add(-1)
	}
	r.sweepLocked(now)
	r.mu.Unlock()
	if rv == nil {
		rv = &reversal{sess: e.sess, b: e.backend, strip: e.strip, clientID: string(e.x.Msg.ID), start: e.start}
	}
	rv.x = e.x
	rv.rounds++
	if rv.rounds > maxInputRounds {
		r.fw.completeErrData(e, codec.CodeInternalError, "mcprouter: backend "+c.b.cfg.Name+" asked for input "+
			strconv.Itoa(maxInputRounds)+" times for one request (input_required) and asked again; the router stops there", nil)
		return true
	}
	reqs, code, msg, data := r.readInputs(c.b, e.sess, m.Result)
	if code != 0 {
		r.fw.completeErrData(e, code, msg, data)
		return true
	}
	var state []byte
	if s := codec.Member(m.Result, "requestState"); s != nil {
		state = append([]byte(nil), s...)
	}
	// The entry is done with; the exchange is the reversal's until the retry, whose
	// backend call is traced apart from this one's.
	endRound(e.x)
	e.x.Tag, e.x = nil, nil
	r.fw.release(e)
	r.count.Add(1)
	r.mu.Lock()
	r.gathering[rv] = struct{}{}
	r.mu.Unlock()
	r.fw.life.spawn(func() { r.gather(rv, reqs, state) })
	return true
}

// readInputs copies the input requests of a backend's input_required result, or says
// why they cannot be put to the client: a method with no 2025 counterpart, a capability
// the client did not declare, too many at once.
func (r *reversals) readInputs(b *backend, sess *router.Session, result []byte) (reqs []inputRequest, code int, msg string, data []byte) {
	caps := sess.ClientCapabilities()
	modern.EachInputRequest(result, func(key, method, params []byte) bool {
		if len(reqs) == maxInputRequests {
			code, msg = codec.CodeInternalError, "mcprouter: backend "+b.cfg.Name+" asked for more than "+strconv.Itoa(maxInputRequests)+" inputs at once (input_required)"
			return false
		}
		capName := capabilityFor(string(method))
		if capName == "" {
			code, msg = codec.CodeInternalError, "mcprouter: backend "+b.cfg.Name+" asked the client for "+strconv.Quote(string(method))+
				" (input_required), which is no request a server may make of a client"
			return false
		}
		if missing := missingCapability(caps, string(method), params); missing != "" {
			code, msg = codec.CodeInvalidParams, "mcprouter: backend "+b.cfg.Name+" needs the client to answer "+string(method)+
				", and this client did not declare the "+missing+" capability"
			data = requiredCapabilities(missing)
			return false
		}
		url := capName == "elicitation" && isURLMode(params)
		copied := append([]byte(nil), params...)
		if url && codec.Member(params, "elicitationId") == nil {
			copied = withElicitationID(params, r.urlIDs.Add(1))
		}
		reqs = append(reqs, inputRequest{key: append([]byte(nil), key...), method: string(method), params: copied})
		return true
	})
	if code == 0 && len(reqs) == 0 && codec.Member(result, "requestState") == nil {
		code, msg = codec.CodeInternalError, "mcprouter: backend "+b.cfg.Name+" answered input_required with neither inputRequests nor requestState"
	}
	return reqs, code, msg, data
}

// withElicitationID returns a URL-mode elicitation's params (an object) with an
// elicitationId, which 2025-11-25 requires of the mode and 2026-07-28 dropped along with
// notifications/elicitation/complete: the router's own, n-th of the process (a 2025
// client waiting for that notification waits in vain; it learns the outcome from the
// call's result, as a 2026-07-28 client does).
func withElicitationID(params []byte, n uint64) []byte {
	out := append([]byte(`{"elicitationId":"mcprouter-`), strconv.FormatUint(n, 10)...)
	out = append(out, '"')
	if rest := bytes.TrimLeft(params[1:], " \t\r\n"); len(rest) > 0 && rest[0] != '}' {
		out = append(out, ',')
	}
	return append(out, params[1:]...)
}

// gather puts one round's input requests to rv's client, waits for every answer (or
// the client's cancellation, or the router's end) and sends the retry.
func (r *reversals) gather(rv *reversal, reqs []inputRequest, state []byte) {
	ctx, stop := context.WithCancel(r.fw.life.ctx)
	defer stop()
	r.mu.Lock()
	cancelled := rv.cancelled
	rv.stop = stop
	r.mu.Unlock()
	if cancelled {
		r.end(rv, func() { r.finishCancelled(rv) })
		return
	}

	answers := make(chan []byte, len(reqs))
	sink := &upConn{b: rv.b, conn: answerSink(answers)}
	pending := make([]*serverRequest, len(reqs))
	for i, q := range reqs {
		sr := &serverRequest{method: q.method, conn: sink, backendID: strconv.AppendInt(nil, int64(i), 10), sess: rv.sess}
		if !r.srv.put(sr) {
			r.forgetPending(pending)
			r.end(rv, func() {
				r.reply(rv, codec.AppendError(nil, rv.x.Msg.ID, codec.CodeSessionLimit, "mcprouter: the client session already has "+
					strconv.Itoa(r.srv.max)+" requests from backends waiting for an answer; "+q.method+" (input_required from backend "+rv.b.cfg.Name+") refused", nil))
			})
			return
		}
		pending[i] = sr
		out := codec.AppendRequest(nil, strconv.AppendUint(nil, sr.id, 10), q.method, q.params)
		// On the stream of the request that caused it, where the client expects it.
		if rv.x.Send(out) != nil {
			if t := rv.sess.TransportSession(); t == nil || t.Send(out) != nil {
				r.forgetPending(pending)
				r.end(rv, func() {
					r.reply(rv, codec.AppendError(nil, rv.x.Msg.ID, codec.CodeInternalError, "mcprouter: cannot reach the client with "+q.method+" (input_required from backend "+rv.b.cfg.Name+")", nil))
				})
				return
			}
		}
	}

	results := make([][]byte, len(reqs))
	for got := 0; got < len(reqs); {
		select {
		case <-ctx.Done():
			r.forgetPending(pending)
			r.end(rv, func() {
				if rv.cancelled {
					r.finishCancelled(rv)
					return
				}
				r.reply(rv, codec.AppendError(nil, rv.x.Msg.ID, codec.CodeBackendUnavailable, "router shutting down", nil))
			})
			return
		case ans := <-answers:
			var m codec.Message
			i, ok := 0, codec.Scan(ans, &m) == nil
			if ok {
				n, err := strconv.Atoi(string(m.ID))
				i, ok = n, err == nil && n >= 0 && n < len(reqs) && results[n] == nil
			}
			if !ok {
				continue
			}
			pending[i] = nil
			if m.Kind == codec.KindError {
				r.forgetPending(pending)
				r.end(rv, func() { r.clientRefused(rv, reqs[i].method, m.Error) })
				return
			}
			results[i] = m.Result
			got++
		}
	}

	responses := []byte{'{'}
	for i, q := range reqs {
		if i > 0 {
			responses = append(responses, ',')
		}
		responses = append(responses, '"')
		responses = append(responses, q.key...)
		responses = append(responses, `":`...)
		responses = append(responses, results[i]...)
	}
	responses = append(responses, '}')
	x := rv.x
	retry := modern.AppendRetry(nil, x.Raw, &x.Msg, x.Msg.ID, responses, state)
	var scanned codec.Message
	if codec.Scan(retry, &scanned) != nil {
		r.end(rv, func() {
			r.reply(rv, codec.AppendError(nil, x.Msg.ID, codec.CodeInternalError, "mcprouter: cannot build the retry for backend "+rv.b.cfg.Name, nil))
		})
		return
	}
	r.mu.Lock()
	delete(r.gathering, rv)
	if rv.cancelled {
		r.mu.Unlock()
		r.count.Add(-1)
		r.finishCancelled(rv)
		return
	}
	rv.stop = nil
	// The retry is the request from now on: the exchange's bytes are its bytes (the
	// client's id is the same), and the table owns the exchange again.
	x.Raw, x.Msg = retry, scanned
	e := r.fw.track(rv.sess, x, rv.b, rv.strip)
	e.start = rv.start
	rv.x = nil
	rv.expires = e.deadline + int64(time.Second)
	r.byEntry[e.id] = rv
	r.mu.Unlock()
	r.fw.forward(e)
}

// end takes rv out of the book of rounds gathering and answers its client with fn.
func (r *reversals) end(rv *reversal, fn func()) {
	r.mu.Lock()
	delete(r.gathering, rv)
	r.mu.Unlock()
	r.count.Add(-1)
	fn()
}

// forgetPending takes the round's unanswered requests out of serverRequests and tells
// the client to stop working on them.
func (r *reversals) forgetPending(pending []*serverRequest) {
	for _, sr := range pending {
		if sr == nil || r.srv.take(sr.id, nil) == nil {
			continue
		}
		if t := sr.sess.TransportSession(); t != nil {
			params := append([]byte(`{"requestId":`), strconv.AppendUint(nil, sr.id, 10)...)
			params = append(params, `,"reason":"the request that needed it ended"}`...)
			t.Send(codec.AppendNotification(nil, "notifications/cancelled", params))
		}
	}
}

// clientRefused answers rv's client when it answered one of the backend's input
// requests with an error (errRaw, or the router's own on its behalf: a timeout, the
// session's end): the backend cannot be told (an InputResponses holds results only), so
// the request fails with that error.
func (r *reversals) clientRefused(rv *reversal, method string, errRaw []byte) {
	code, msg := codec.CodeInternalError, "no answer"
	if re, ok := rpcErrorOf(errRaw).(*router.Error); ok {
		code, msg = re.Code, re.Message
	}
	r.reply(rv, codec.AppendError(nil, rv.x.Msg.ID, code, "mcprouter: "+method+" for backend "+rv.b.cfg.Name+" (input_required) failed: "+msg, nil))
}

// reply answers rv's client request with msg and reports it.
func (r *reversals) reply(rv *reversal, msg []byte) {
	outcome := router.OutcomeError
	if r.fw.rep.on() {
		done := entry{kind: clientRequest, backend: rv.b, x: rv.x, start: rv.start, recv: router.Now()}
		r.fw.rep.done(&done, outcome)
	}
	x := rv.x
	rv.x = nil
	x.Tag = nil
	x.Reply(msg)
}

// finishCancelled ends rv's exchange without a response: its client cancelled it.
func (r *reversals) finishCancelled(rv *reversal) {
	r.fw.stats.Cancelled.Add(1)
	if r.fw.rep.on() {
		done := entry{kind: clientRequest, backend: rv.b, x: rv.x, start: rv.start}
		r.fw.rep.done(&done, router.OutcomeCancelled)
	}
	x := rv.x
	rv.x = nil
	x.Tag = nil
	x.Done()
}

// cancel takes the client's cancellation of its request clientID on s when the request
// is between rounds: the round's wait ends and the client gets no answer. A request
// whose retry is upstream is in the table, where the forwarder's cancel finds it: the
// retry enters the table under r.mu, so one of the two always sees the request.
func (r *reversals) cancel(s *router.Session, clientID []byte) {
	r.cancelWhere(func(rv *reversal) bool { return rv.sess == s && rv.clientID == string(clientID) })
}

// cancelSession cancels, as cancel does, every request of session s between rounds: the
// session ended.
func (r *reversals) cancelSession(s *router.Session) {
	r.cancelWhere(func(rv *reversal) bool { return rv.sess == s })
}

// cancelWhere cancels the requests between rounds that match selects.
func (r *reversals) cancelWhere(match func(*reversal) bool) {
	if r == nil || r.count.Load() == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for rv := range r.gathering {
		if match(rv) {
			rv.cancelled = true
			if rv.stop != nil {
				rv.stop()
			}
		}
	}
}

// sweepLocked drops the records of retries that have surely settled by now without an
// answer input saw (timed out, cancelled, their connection lost); the caller holds
// r.mu.
func (r *reversals) sweepLocked(now int64) {
	for id, rv := range r.byEntry {
		if rv.expires < now {
			delete(r.byEntry, id)
			r.count.Add(-1)
		}
	}
}

// answerSink is where the client's answers to a round's requests arrive: it stands for
// the backend in serverRequests (a serverRequest's conn), which sends it the client's
// answer, or the error it makes when the client does not answer in time or its session
// ends, under the request's index in the round as id.
type answerSink chan []byte

func (a answerSink) Send(_ context.Context, msg []byte) error {
	select {
	case a <- append([]byte(nil), msg...):
	default: // one answer per request: the buffer holds them all
	}
	return nil
}

func (answerSink) SetProtocolVersion(string) {}
func (answerSink) Close() error              { return nil }
func (answerSink) Done() <-chan struct{}     { return nil }
func (answerSink) Err() error                { return nil }
