package client

import (
	"sync"
	"time"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/loadgen/internal/wire"
)

// mux matches replies that arrive on a stream (legacy SSE, stdio) to the calls waiting
// for them, and routes the other messages of a stream: notifications to the
// OnNotification hook, server-to-client requests to a canned answer.
type mux struct {
	index    int
	onNotify func(int, *codec.Message, time.Time)
	// send delivers a message to the server (the answer to a server request). It is
	// called from the reader goroutine and must not wait on that reader.
	send func(msg []byte)

	mu sync.Mutex
	// pending is made by the first register: the mux of a session's GET stream never
	// has a call waiting on it, and a load generator may hold 100,000 of them.
	pending map[uint64]*waiter
	dead    *Error // once set, calls fail at once with it

	msg codec.Message // deliver's scratch; deliver runs on the one reader goroutine
}

// waiter is one call waiting for its reply. Waiters are pooled with their timer and
// result buffer.
type waiter struct {
	done   chan struct{}
	timer  *time.Timer
	result []byte
	err    *Error
}

var waiterPool = sync.Pool{New: func() any {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &waiter{done: make(chan struct{}, 1), timer: t}
}}

func newMux(index int, onNotify func(int, *codec.Message, time.Time)) *mux {
	return &mux{index: index, onNotify: onNotify}
}

// register reserves id before the request is sent, so that a fast reply finds it.
func (m *mux) register(id uint64) (*waiter, *Error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.dead != nil {
		return nil, m.dead
	}
	w := waiterPool.Get().(*waiter)
	w.err = nil
	w.result = w.result[:0]
	if m.pending == nil {
		m.pending = make(map[uint64]*waiter)
	}
	m.pending[id] = w
	return w, nil
}

// cancel forgets a registered id whose request could not be sent.
func (m *mux) cancel(id uint64, w *waiter) {
	m.mu.Lock()
	_, mine := m.pending[id]
	delete(m.pending, id)
	m.mu.Unlock()
	if !mine {
		<-w.done // the reply raced in: drain it so the waiter can be reused
	}
	waiterPool.Put(w)
}

// call sends the request r with id through send and waits until deadline for the reply
// that the stream's reader delivers: Call for the transports whose replies travel on a
// stream (legacy SSE, stdio). The id is registered before the request leaves, so that a
// fast reply finds its waiter.
func (m *mux) call(id uint64, r *Request, deadline time.Time, rep *Reply, send func(msg []byte, deadline time.Time) error) error {
	w, werr := m.register(id)
	if werr != nil {
		return werr
	}
	body := getBody()
	*body = wire.AppendRequest(*body, id, r.Method, r.Params)
	err := send(*body, deadline)
	putBody(body)
	if err != nil {
		m.cancel(id, w)
		return err
	}
	return m.await(id, w, deadline, rep)
}

// notify encodes a notification into a pooled buffer and sends it.
func notify(method string, params []byte, deadline time.Time, send func(msg []byte, deadline time.Time) error) error {
	body := getBody()
	defer putBody(body)
	*body = codec.AppendNotification(*body, method, params)
	return send(*body, deadline)
}

// await waits for the reply to id until deadline and copies it into rep.
func (m *mux) await(id uint64, w *waiter, deadline time.Time, rep *Reply) error {
	w.timer.Reset(time.Until(deadline))
	select {
	case <-w.done:
		w.timer.Stop()
	case <-w.timer.C:
		m.mu.Lock()
		_, mine := m.pending[id]
		delete(m.pending, id)
		m.mu.Unlock()
		if mine {
			waiterPool.Put(w)
			return errTimeout
		}
		<-w.done // the reader took it just now and is completing it
	}
	err := w.err
	if err == nil {
		rep.set(0, w.result)
	}
	waiterPool.Put(w)
	if err != nil {
		return err
	}
	return nil
}

// fail ends every pending call with err and makes later calls fail at once.
func (m *mux) fail(err *Error) {
	m.mu.Lock()
	if m.dead == nil {
		m.dead = err
	}
	for id, w := range m.pending {
		delete(m.pending, id)
		w.err = err
		w.done <- struct{}{}
	}
	m.mu.Unlock()
}

// deliver handles one message read from the stream at time at. It reports false for
// bytes that are not a JSON-RPC message (the caller may count or ignore them). It is
// called from the stream's single reader goroutine.
func (m *mux) deliver(raw []byte, at time.Time) bool {
	msg := &m.msg
	if err := codec.Scan(raw, msg); err != nil {
		return false
	}
	switch msg.Kind {
	case codec.KindResult, codec.KindError:
		id, ok := codec.ParseUintID(msg.ID)
		if !ok {
			return true // not one of ours (we only send integer ids)
		}
		m.mu.Lock()
		w := m.pending[id]
		delete(m.pending, id)
		m.mu.Unlock()
		if w == nil {
			return true // late reply to a call that timed out
		}
		if msg.Kind == codec.KindResult {
			w.result = append(w.result[:0], msg.Result...)
		} else {
			w.err = rpcError(msg.Error)
		}
		w.done <- struct{}{}
	case codec.KindNotification:
		if m.onNotify != nil {
			m.onNotify(m.index, msg, at)
		}
	case codec.KindRequest:
		if m.send != nil {
			m.send(answerServerRequest(nil, msg))
		}
	}
	return true
}

// maxAnswering bounds the answers to server requests being sent at once per session.
const maxAnswering = 8

// answerer sends answers to server-to-client requests off the reader goroutine (a POST
// may take a while), at most maxAnswering at once; beyond that the reader sends the
// answer itself and so stops reading until it is out: backpressure instead of an
// unbounded number of goroutines when a server floods a session with requests.
type answerer struct {
	slots chan struct{}
	send  func(msg []byte)
}

func newAnswerer(send func(msg []byte)) func(msg []byte) {
	a := &answerer{slots: make(chan struct{}, maxAnswering), send: send}
	return a.answer
}

func (a *answerer) answer(msg []byte) {
	b := append([]byte(nil), msg...) // msg is the reader's scratch
	select {
	case a.slots <- struct{}{}:
		go func() {
			defer func() { <-a.slots }()
			a.send(b)
		}()
	default:
		a.send(b)
	}
}

// rpcError turns a raw JSON-RPC error object into an *Error.
func rpcError(errObj []byte) *Error {
	code, message, ok := wire.ErrorCode(errObj)
	if !ok {
		return protocolErr("error response without an integer code")
	}
	return &Error{Class: ClassJSONRPC, Code: code, Msg: message}
}

// answerServerRequest appends the answer to a server-to-client request. A load
// generator has no user to ask: ping is answered, roots/list gets an empty list,
// elicitation is declined, and everything else (sampling, ...) is not supported.
func answerServerRequest(dst []byte, msg *codec.Message) []byte {
	switch string(msg.Method) {
	case "ping":
		return codec.AppendResult(dst, msg.ID, []byte("{}"))
	case "roots/list":
		return codec.AppendResult(dst, msg.ID, []byte(`{"roots":[]}`))
	case "elicitation/create":
		return codec.AppendResult(dst, msg.ID, []byte(`{"action":"decline"}`))
	}
	return codec.AppendError(dst, msg.ID, codec.CodeMethodNotFound, "mcpload does not implement "+string(msg.Method), nil)
}
