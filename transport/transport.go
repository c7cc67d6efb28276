// Package transport carries JSON-RPC bytes between MCP clients and the router. It knows HTTP,
// SSE and stdio framing and the HTTP-level rules of each MCP revision (sessions, headers,
// status codes), and nothing of MCP methods: every valid message is handed to a Handler (the
// router) as an Exchange, and the Handler answers through it.
//
// The seam is deliberately small:
//
//	transport ──Exchange──▶ Handler.HandleMessage ──x.Reply / x.Send / x.Done──▶ transport
//
// so that the same router serves Streamable HTTP, legacy HTTP+SSE and stdio alike, and the
// reference backend reuses these servers with a handler of its own.
package transport

import (
	"errors"
	"sync"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/transport/auth"
)

// Handler is the MCP layer behind the transports; router.Router implements it.
//
// HandleMessage is called once for every valid message a client sends (each element of a
// batch separately), on the goroutine that read it. It must not block: it hands the
// message to the dispatcher and returns. For every Exchange it receives, the Handler must
// eventually call exactly one of x.Reply (requests) or x.Done (notifications, responses),
// from any goroutine; the transport recycles x afterwards.
//
// SessionClosed is called once when a session ends, whatever the reason (DELETE, shutdown,
// idle expiry, transport closed).
type Handler interface {
	HandleMessage(x *Exchange)
	SessionClosed(s *Session)
}

// SessionState is the handler's own state attached to a session (negotiated revision,
// capabilities...). The transport stores it and hands it back; it never looks inside. A
// handler's states are all of one concrete type, never nil: a session keeps its state in
// an atomic.Value, which takes one type.
type SessionState interface{}

// Errors that the transports report to handlers; compare with errors.Is.
var (
	// ErrTooManySessions: Bind refused because the max-sessions limit is reached and
	// every session is busy.
	ErrTooManySessions = errors.New("transport: too many sessions")
	// ErrClientQuota: Bind refused because the client's address holds its quota of
	// sessions (RegistryConfig.MaxPerClient) and every one of them is busy.
	ErrClientQuota = errors.New("transport: too many sessions from this client address")
	// ErrSessionClosed: the session ended; nothing more can be sent on it.
	ErrSessionClosed = errors.New("transport: session closed")
	// ErrAlreadyBound: Bind on an exchange that already belongs to a session.
	ErrAlreadyBound = errors.New("transport: exchange already has a session")
	// ErrNoStream: a server-initiated message could not be delivered because the client has
	// no stream open and the session's buffer is full.
	ErrNoStream = errors.New("transport: no stream to deliver on")
	// ErrNoSession: a SessionResolver knows no session with that id.
	ErrNoSession = errors.New("transport: no such session")
	// ErrForeignSession: the session belongs to another principal than the request's;
	// the client is told it does not exist.
	ErrForeignSession = errors.New("transport: session of another principal")
)

// Exchange is one client message in flight: its bytes, its scan, its session, and the way
// back to the client. Exchanges are pooled by the transport: after Reply or Done the
// Handler must not touch it (nor Raw, nor any view in Msg).
type Exchange struct {
	// Msg is the scan of Raw (views into Raw).
	Msg codec.Message
	// Raw is the message's bytes, valid until Reply or Done.
	Raw []byte
	// Session is the client's session, nil when the message arrived without one (an
	// initialize on Streamable HTTP, or a stateless request).
	Session *Session
	// Version is the protocol revision the transport established for this message: the
	// MCP-Protocol-Version header when present (already checked as supported), the
	// session's negotiated revision otherwise, or "" when neither is known ("" for a
	// stateless request too: its revision is in its own _meta and Headers, judged by the
	// handler).
	Version string
	// Carrier says which client transport carried the message.
	Carrier Carrier
	// Batch is true when the message came as an element of a JSON-RPC batch.
	Batch bool
	// Principal is who sent the message, as the HTTP edge authenticated it; nil
	// without authentication (and on stdio and NATS, which have their own). On a
	// session it is the session's owner: the edge refuses anyone else.
	Principal *auth.Principal

	// Stateless is true for a request served without a session, in a revision that has
	// none (stateless.go); Headers are then its raw HTTP headers of that revision.
	Stateless bool
	Headers   StatelessHeaders

	// Tag is the handler's own per-exchange data (the router's in-flight entry); the
	// transport clears it when the exchange is recycled.
	Tag any
	// Trace is the handler's trace of the request (its span), nil when tracing is off.
	Trace any

	call   *call
	screen StatelessScreen // the handler's, for a stateless exchange
	own    []byte          // the exchange's own copy of the message's bytes (or of its error's data), pooled
}

// Reply sends the response to a request and ends the exchange. msg is copied.
func (x *Exchange) Reply(msg []byte) {
	if x.screen != nil {
		bp := screenBufs.Get().(*[]byte)
		out := x.screen.ScreenReply(x, msg, (*bp)[:0])
		x.call.reply(out)
		keepScreenBuf(bp, out, msg)
		x.release()
		return
	}
	x.call.reply(msg)
	x.release()
}

// Done ends an exchange that needs no response (notification or response from the client).
func (x *Exchange) Done() { x.call.reply(nil); x.release() }

// Send delivers a message that belongs to this request and precedes its response
// (progress, logging, a server-to-client request). On Streamable HTTP it turns the reply
// into an SSE stream when the client accepts one, and otherwise uses the session's GET
// stream. msg is copied. Send must not be called after Reply or Done: the exchange is
// recycled then (callers that may race with the reply guard it, as the fleet does).
func (x *Exchange) Send(msg []byte) error {
	if x.screen != nil {
		bp := screenBufs.Get().(*[]byte)
		defer putScreenBuf(bp)
		out, ok := x.screen.ScreenSend(x, msg, (*bp)[:0])
		if !ok {
			return nil
		}
		return x.call.send(out)
	}
	return x.call.send(msg)
}

// screenBufs hold what a StatelessScreen makes of a message until the call copies it.
var screenBufs = sync.Pool{New: func() any { return new([]byte) }}

func putScreenBuf(bp *[]byte) {
	if cap(*bp) > maxPooledBuf {
		*bp = nil
	}
	screenBufs.Put(bp)
}

// Bind creates the session for this exchange (an initialize request that succeeded) with
// the negotiated revision and the handler's state, and returns it. The session id travels
// back with the reply (the Mcp-Session-Id header on Streamable HTTP).
func (x *Exchange) Bind(version string, state SessionState) (*Session, error) {
	s, err := x.call.bind(version, state)
	if err != nil {
		return nil, err
	}
	x.Session = s
	return s, nil
}

func (x *Exchange) release() {
	c := x.call
	x.recycle()
	c.unref()
}

// maxPooledBuf is the largest buffer kept in a pool; larger ones are left to the GC so
// that one huge message does not pin memory forever.
const maxPooledBuf = 64 << 10

var exchangePool = sync.Pool{New: func() any { return new(Exchange) }}

func newExchange() *Exchange { return exchangePool.Get().(*Exchange) }

// Carrier names the client transport that carries a session's messages.
type Carrier uint8

const (
	CarrierStreamable Carrier = iota + 1 // Streamable HTTP (2025-03-26 and later)
	CarrierLegacySSE                     // HTTP+SSE (2024-11-05)
	CarrierStdio                         // newline-delimited JSON on stdin/stdout
	CarrierNATS                          // NATS request/reply (see ServeNATS)
)

func (c Carrier) String() string {
	switch c {
	case CarrierStreamable:
		return "streamable"
	case CarrierLegacySSE:
		return "sse"
	case CarrierStdio:
		return "stdio"
	case CarrierNATS:
		return "nats"
	}
	return "unknown"
}

// rebase moves every view of m from the buffer from to the same offsets in to (a copy of
// from), so a message scanned once can travel with a copy of its bytes. It relies on the
// codec's views being plain sub-slices, whose capacity reaches the end of the input.
func rebase(m *codec.Message, from, to []byte) {
	mv := func(v []byte) []byte {
		if v == nil {
			return nil
		}
		off := cap(from) - cap(v)
		return to[off : off+len(v)]
	}
	m.ID, m.Method, m.Params, m.Result, m.Error = mv(m.ID), mv(m.Method), mv(m.Params), mv(m.Result), mv(m.Error)
	m.Name, m.URI, m.ProgressToken, m.RequestID, m.Cursor = mv(m.Name), mv(m.URI), mv(m.ProgressToken), mv(m.RequestID), mv(m.Cursor)
	m.Meta = mv(m.Meta)
}
