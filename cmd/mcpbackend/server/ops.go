package server

import (
	"strconv"
	"sync"
	"time"

	"github.com/mcprouter/mcprouter/codec"
)

// An op is a tools/call that does not answer at once: sleep, progress, sample. It runs on
// a timer (no goroutine is parked per call), is recorded in its session under its request
// id so that notifications/cancelled can stop it, and ends exactly once: by its own
// completion (Reply), by cancellation or session end (Done, no reply), or by its timeout.
//
// Locking: o.mu guards the op's life and every use of its Responder, so that nothing is
// ever sent after the exchange ended (the transport recycles it). o.mu may be held while
// taking sess.mu, never the other way round.
type op struct {
	srv  *Server
	sess *Session
	r    Responder
	kind opKind

	id       []byte // the request's id token (a copy: the request's bytes go away)
	key      string // string(id): the key in sess.ops
	token    []byte // progress token, nil when the request has none
	steps    int
	step     int
	interval time.Duration // sleep: the duration; progress: between steps; sample: timeout
	callKey  string        // sample: id token of our request to the client
	req      []byte        // sample: the request to send, dropped once sent

	mu    sync.Mutex
	ended bool
	timer *time.Timer
}

type opKind uint8

const (
	opSleep opKind = iota
	opProgress
	opSample
	opNever // fault_never_answer: forgotten at its timeout, never answered
)

// startOp registers o for the request m and starts it. On refusal (overload, duplicate
// id, session gone) the request is answered here.
func (s *Server) startOp(m *codec.Message, sess *Session, r Responder, o *op) {
	if s.inflight.Add(1) > int64(s.cfg.MaxInFlight) {
		s.inflight.Add(-1)
		s.Stats.Overload.Add(1)
		overloaded(r, m.ID)
		return
	}
	o.srv, o.sess, o.r = s, sess, r
	o.id = append([]byte(nil), m.ID...)
	o.key = string(o.id)
	if m.ProgressToken != nil {
		o.token = append([]byte(nil), m.ProgressToken...)
	}

	sess.mu.Lock()
	if sess.closed {
		sess.mu.Unlock()
		s.inflight.Add(-1)
		r.Done() // nobody is there to read an answer
		return
	}
	if _, dup := sess.ops[o.key]; dup {
		sess.mu.Unlock()
		s.inflight.Add(-1)
		replyError(r, m.ID, codec.CodeInvalidRequest, "Invalid Request: a request with this id is already in flight", nil)
		return
	}
	if sess.ops == nil {
		sess.ops = make(map[string]*op)
	}
	sess.ops[o.key] = o
	if o.callKey != "" {
		if sess.calls == nil {
			sess.calls = make(map[string]*op)
		}
		sess.calls[o.callKey] = o
	}
	sess.mu.Unlock()

	o.mu.Lock()
	if o.ended { // cancelled between registration and here
		o.mu.Unlock()
		return
	}
	if o.kind == opSample {
		err := o.r.Send(o.req)
		o.req = nil
		if err != nil {
			o.endLocked()
			o.mu.Unlock()
			toolError(o.r, o.id, "sample: cannot send the sampling request to the client: "+err.Error())
			return
		}
	}
	o.timer = time.AfterFunc(o.interval, o.fire)
	o.mu.Unlock()
}

// endLocked marks the op ended and forgets it. The caller holds o.mu and then answers
// (or not) through o.r, after unlocking.
func (o *op) endLocked() {
	o.ended = true
	if o.timer != nil {
		o.timer.Stop()
	}
	s := o.sess
	s.mu.Lock()
	if s.ops[o.key] == o {
		delete(s.ops, o.key)
	}
	if o.callKey != "" && s.calls[o.callKey] == o {
		delete(s.calls, o.callKey)
	}
	s.mu.Unlock()
	o.srv.inflight.Add(-1)
}

// fire runs on the op's timer.
func (o *op) fire() {
	o.mu.Lock()
	if o.ended {
		o.mu.Unlock()
		return
	}
	switch o.kind {
	case opSleep:
		o.endLocked()
		o.mu.Unlock()
		var sb [48]byte
		st := append(sb[:0], `{"sleptMs":`...)
		st = appendInt(st, o.interval.Milliseconds())
		st = append(st, '}')
		toolText(o.r, o.sess, o.id, "slept "+strconv.FormatInt(o.interval.Milliseconds(), 10)+" ms", st)
	case opProgress:
		o.step++
		o.sendProgress()
		for o.interval == 0 && o.step < o.steps { // no pause between steps: no timer either
			o.step++
			o.sendProgress()
		}
		if o.step < o.steps {
			o.timer.Reset(o.interval)
			o.mu.Unlock()
			return
		}
		o.endLocked()
		o.mu.Unlock()
		var sb [48]byte
		st := append(sb[:0], `{"steps":`...)
		st = appendInt(st, int64(o.steps))
		st = append(st, '}')
		toolText(o.r, o.sess, o.id, "done: "+strconv.Itoa(o.steps)+" steps", st)
	case opNever:
		o.endLocked()
		o.mu.Unlock()
		o.r.Done()
	case opSample: // the timeout
		o.endLocked()
		o.mu.Unlock()
		o.cancelCall("timed out")
		toolError(o.r, o.id, "sample: the client did not answer the sampling request within "+o.interval.String())
	}
}

// sendProgress sends notifications/progress for the current step (when the request
// asked for progress) and a debug log line. The caller holds o.mu.
func (o *op) sendProgress() {
	if o.token != nil {
		bp := getBuf()
		b := append(*bp, `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":`...)
		b = append(b, o.token...)
		b = append(b, `,"progress":`...)
		b = appendInt(b, int64(o.step))
		b = append(b, `,"total":`...)
		b = appendInt(b, int64(o.steps))
		if o.sess.era >= era20250326 {
			b = append(b, `,"message":"step `...)
			b = appendInt(b, int64(o.step))
			b = append(b, ` of `...)
			b = appendInt(b, int64(o.steps))
			b = append(b, '"')
		}
		b = append(b, `}}`...)
		o.r.Send(b)
		*bp = b
		putBuf(bp)
	}
	if o.sess.logLevel.Load() <= levelDebug {
		o.srv.logTo(o.r, o.sess, levelDebug, "progress: step "+strconv.Itoa(o.step)+" of "+strconv.Itoa(o.steps))
	}
}

// cancel ends the in-flight call with the given request id without a reply, as
// notifications/cancelled asks. Unknown or finished ids are ignored: the request may
// have completed while the notification travelled.
func (sess *Session) cancel(requestID []byte) {
	sess.mu.Lock()
	o := sess.ops[string(requestID)]
	sess.mu.Unlock()
	if o == nil {
		return
	}
	if o.abandon() {
		o.srv.Stats.Cancelled.Add(1)
	}
}

// abandon ends the op without a reply; false if it had ended already.
func (o *op) abandon() bool {
	o.mu.Lock()
	if o.ended {
		o.mu.Unlock()
		return false
	}
	o.endLocked()
	o.mu.Unlock()
	o.cancelCall("the tool call was cancelled")
	o.r.Done()
	return true
}

// cancelCall tells the client that our sampling request is no longer wanted.
func (o *op) cancelCall(reason string) {
	out := o.sess.sender()
	if o.callKey == "" || out == nil {
		return
	}
	bp := getBuf()
	b := append(*bp, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":`...)
	b = append(b, o.callKey...)
	b = append(b, `,"reason":`...)
	b = codec.AppendString(b, reason)
	b = append(b, `}}`...)
	out.Send(b)
	*bp = b
	putBuf(bp)
}

// sample starts the sampling round trip: a sampling/createMessage request to the client,
// whose answer (a response message in this session, matched by id) completes the call.
func (s *Server) sample(m *codec.Message, sess *Session, r Responder, args []byte) {
	prompt := member(args, "prompt")
	if !isString(prompt) {
		toolError(r, m.ID, "sample needs a string argument prompt")
		return
	}
	maxTokens, ok := intArg(args, "maxTokens", 100)
	if !ok || maxTokens < 1 || maxTokens > 1<<20 {
		toolError(r, m.ID, "sample: maxTokens must be an integer between 1 and 1048576")
		return
	}
	if sess.modern {
		s.sampleModern(m, sess, r, prompt, maxTokens)
		return
	}
	if !sess.sampling {
		toolError(r, m.ID, "sample: the client did not declare the sampling capability at initialize")
		return
	}
	o := &op{kind: opSample, interval: s.cfg.SampleTimeout}
	var kb [32]byte
	key := append(kb[:0], `"mcpbackend-`...)
	key = strconv.AppendUint(key, s.nextCall.Add(1), 10)
	key = append(key, '"')
	o.callKey = string(key)

	req := append([]byte(nil), `{"jsonrpc":"2.0","id":`...)
	req = append(req, o.callKey...)
	req = append(req, `,"method":"sampling/createMessage","params":{"messages":[{"role":"user","content":{"type":"text","text":`...)
	req = append(req, prompt...)
	req = append(req, `}}],"maxTokens":`...)
	req = appendInt(req, maxTokens)
	req = append(req, `}}`...)
	o.req = req
	s.startOp(m, sess, r, o)
}

// answered takes a client's response (to a request this server sent) and completes the
// call waiting for it. Answers nobody waits for (late, cancelled) are dropped.
func (sess *Session) answered(m *codec.Message) {
	sess.mu.Lock()
	o := sess.calls[string(m.ID)]
	sess.mu.Unlock()
	if o == nil {
		return
	}
	o.mu.Lock()
	if o.ended {
		o.mu.Unlock()
		return
	}
	o.endLocked()
	o.mu.Unlock()
	if m.Kind == codec.KindError {
		msg, _ := stringValue(member(m.Error, "message"))
		toolError(o.r, o.id, "sample: the client refused the sampling request: "+msg)
		return
	}
	text := sampledText(m.Result)
	if text == nil {
		toolError(o.r, o.id, "sample: the client's answer holds no text content")
		return
	}
	// The text token goes back verbatim, as echo does: it was validated by the codec.
	bp := getBuf()
	b := beginResult(*bp, o.id)
	b = append(b, `{"content":`...)
	b = appendTextContent(b, text)
	if o.sess.era >= era20250618 {
		b = append(b, `,"structuredContent":{"text":`...)
		b = append(b, text...)
		b = append(b, '}')
	}
	b = append(b, `}}`...)
	o.r.Reply(b)
	*bp = b
	putBuf(bp)
}

// sampledText finds the text token of a CreateMessageResult: content is one content
// block, or (from 2025-11-25, with tools) an array of them.
func sampledText(result []byte) []byte {
	content := member(result, "content")
	if len(content) > 0 && content[0] == '[' {
		var found []byte
		forEach(content, func(v []byte) bool {
			if string(member(v, "type")) == `"text"` {
				found = member(v, "text")
				return false
			}
			return true
		})
		if isString(found) {
			return found
		}
		return nil
	}
	if t := member(content, "text"); isString(t) {
		return t
	}
	return nil
}
