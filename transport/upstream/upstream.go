// Package upstream holds mcprouter's backend clients: the byte-level connections that carry
// already-encoded JSON-RPC messages from the router to one backend MCP server instance and
// bring back whatever that backend sends.
//
// Three transports are provided, all behind the same [Conn] interface:
//
//   - [DialHTTP]: Streamable HTTP (2025-03-26 and later) on a pooled fasthttp.HostClient,
//     with JSON and SSE replies, the backend's GET stream, upstream session ids and
//     transparent session renewal when the backend restarts;
//   - [DialSSE]: the legacy HTTP+SSE transport of 2024-11-05 servers;
//   - [StartPool]: N supervised stdio child processes of one backend, restarted with
//     capped exponential backoff.
//
// The clients know nothing of tool names or id mapping: the router does the MCP lifecycle
// (it sends initialize itself, through a Conn) and maps ids. The clients do watch for two
// methods, initialize and notifications/initialized, and keep a copy of the last ones sent:
// when a backend loses the session (an HTTP 404 after a restart, a child process that was
// restarted, a legacy SSE stream that dropped) the Conn replays that handshake under a
// private request id, swallows the reply, and reports [EventRenewed] to the Sink, so that
// the router only has to re-establish per-session state (subscriptions, log level) and
// never sees a broken backend as long as the restart is quick.
//
// The HTTP clients present the router's own credentials for the backend ([Credential]:
// a static or file-held secret, an OAuth client credentials token, or a client's own
// token obtained by RFC 8693 [TokenExchange]), asked for on every request so that a
// rotated or refreshed one is used at once; a client's token is never sent to a
// backend. A backend that refuses them gets [ErrUnauthorized], naming it.
package upstream

import (
	"context"
	"errors"
	"strconv"

	"github.com/mcprouter/mcprouter/codec"
)

// Conn is one connection (one upstream session) to one backend instance.
//
// Send may be called concurrently from any number of goroutines. Messages from the
// backend (responses, notifications, server-to-client requests) are delivered to the
// Sink given when the Conn was made, in the order received on each stream; different
// streams (an HTTP POST's SSE reply, the GET stream) may call the Sink concurrently.
//
// When Send returns nil the backend has accepted msg. Where the transport returns the
// reply in the same exchange (Streamable HTTP: a JSON body or an SSE stream on the POST),
// every message of that reply, the response included, has been delivered to the Sink
// before Send returns; callers that must not wait for a long tool call call Send from a
// goroutine of their own. Where replies travel separately (stdio, legacy SSE), they reach
// the Sink later.
type Conn interface {
	// Send sends one complete JSON-RPC message (or, on HTTP, a batch). msg is not
	// retained after Send returns. ctx bounds the whole exchange; on HTTP its deadline
	// is the request timeout.
	Send(ctx context.Context, msg []byte) error
	// SetProtocolVersion records the revision negotiated by initialize. HTTP transports
	// send it as MCP-Protocol-Version on every later request, and a transparent session
	// renewal is accepted only if the backend negotiates the same revision again.
	SetProtocolVersion(v string)
	// Close ends the session (HTTP DELETE, child processes stopped) and releases every
	// resource; it waits, with bounded timeouts, for the goroutines the Conn started.
	Close() error
	// Done is closed when the connection is dead for good: closed, or its session lost
	// without a way to renew it. A down-but-recovering backend does not close Done.
	Done() <-chan struct{}
	// Err says why Done was closed; nil while the connection is alive.
	Err() error
}

// AnswersApart reports whether c's answers come apart from Send: Send returns once the
// message is written and the answer arrives later on the Sink (a stdio child, a legacy
// HTTP+SSE stream). When such a connection dies, no Send is left to see that the
// requests it carried lost their answers (an HTTP Send returns ErrNoResponse itself):
// their owner learns it from EventDown. A Conn of another package says so with a method
// AnswersApart() bool.
func AnswersApart(c Conn) bool {
	switch c := c.(type) {
	case *Instance, *SSEConn:
		return true
	case interface{ AnswersApart() bool }:
		return c.AnswersApart()
	}
	return false
}

// The options a Conn may have beyond the interface, each reached through the function
// of its name, so that callers name what they ask for.
type (
	closeCanceller interface{ CancelsByClosing() bool }
	streamStarter  interface{ StartStream() }
	restarter      interface{ Restarts() int64 }
)

// CancelsByClosing reports whether a request on c is cancelled by closing its stream (a
// 2026-07-28 backend: StatelessConn) rather than with notifications/cancelled.
func CancelsByClosing(c Conn) bool {
	cc, ok := c.(closeCanceller)
	return ok && cc.CancelsByClosing()
}

// StartStream opens c's standalone stream for the backend's own notifications (list
// changes, resource updates), where c has one (HTTPConn's GET stream): once its session
// exists.
func StartStream(c Conn) {
	if s, ok := c.(streamStarter); ok {
		s.StartStream()
	}
}

// Restarts is how many times c's backend process was started again (a stdio Instance);
// false when c has no process of its own.
func Restarts(c Conn) (int64, bool) {
	if r, ok := c.(restarter); ok {
		return r.Restarts(), true
	}
	return 0, false
}

// Sink receives what a backend sends. Its methods must not block for long: the router
// copies and dispatches. They may be called concurrently from different streams.
type Sink interface {
	// Message delivers one JSON-RPC message; msg is valid only during the call.
	Message(msg []byte)
	// Event reports a change in the connection's state; err carries the cause when there
	// is one. See the Event constants for what each one asks of the router.
	Event(e Event, err error)
}

// RelatedSink is an optional Sink extension. Messages that arrive on the reply stream of
// one request (progress, logging, a server-to-client request made while handling it) are
// delivered with that request's id, so that a router multiplexing many clients over one
// upstream session can route them to the client that made the request.
type RelatedSink interface {
	Related(reqID, msg []byte)
}

// SinkFuncs adapts two functions to a Sink; nil fields ignore their calls.
type SinkFuncs struct {
	OnMessage func(msg []byte)
	OnEvent   func(e Event, err error)
}

// Message implements Sink.
func (s SinkFuncs) Message(msg []byte) {
	if s.OnMessage != nil {
		s.OnMessage(msg)
	}
}

// Event implements Sink.
func (s SinkFuncs) Event(e Event, err error) {
	if s.OnEvent != nil {
		s.OnEvent(e, err)
	}
}

// Event is a change in a connection's state, reported to the Sink.
type Event uint8

const (
	// EventDown: the backend instance was lost (the child process exited, the legacy
	// SSE stream dropped). Requests in flight on it will get no answer: the router
	// fails them. Send returns ErrBackendDown until EventUp or EventRenewed.
	EventDown Event = iota + 1
	// EventUp: the instance is back (a new child process) but no handshake had been
	// recorded to replay, so it is not initialized: the router must initialize it.
	EventUp
	// EventRenewed: the backend had lost the session and the Conn established a new one
	// by replaying the recorded initialize handshake. Everything the backend kept per
	// session (subscriptions, log level, its own request state) is gone: the router
	// re-subscribes and may refresh its catalog. Requests that were in flight when the
	// session was lost have failed or will get no answer; the message whose 404 revealed
	// the loss was retried on the new session.
	EventRenewed
	// EventExpired: the session was lost and could not be renewed; the Conn is dead
	// (Done is closed). The router dials a new Conn and initializes it.
	EventExpired
)

// String returns the event's name for logs.
func (e Event) String() string {
	switch e {
	case EventDown:
		return "down"
	case EventUp:
		return "up"
	case EventRenewed:
		return "renewed"
	case EventExpired:
		return "expired"
	}
	return "event(" + strconv.Itoa(int(e)) + ")"
}

// Errors returned by the clients; compare with errors.Is, never by string.
var (
	// ErrSessionExpired: the backend no longer knows our session (HTTP 404) and it could
	// not be renewed. The message was not processed by the backend.
	ErrSessionExpired = errors.New("upstream: session expired")
	// ErrBackendDown: the backend cannot be reached right now (connection refused, child
	// process not running, stream lost and not yet re-established, HTTP 502/503/504).
	ErrBackendDown = errors.New("upstream: backend down")
	// ErrClosed: the Conn was closed by its owner.
	ErrClosed = errors.New("upstream: connection closed")
	// ErrTooLarge: a message from the backend exceeded the configured maximum.
	ErrTooLarge = errors.New("upstream: message too large")
	// ErrStreamLost: an SSE stream ended before the response to the request it carried
	// arrived, and it could not be resumed. The backend may or may not have processed
	// the request.
	ErrStreamLost = errors.New("upstream: stream lost before the response")
	// ErrNoResponse: the connection closed (or was reset) after the message was written
	// and before any byte of the answer arrived: a backend killed mid-request, or its
	// connections dropped. Unlike ErrBackendDown, the backend may have processed the
	// message. Send has already sent it again once when RetrySafe allowed it; whether
	// another instance may take it (a tool call may act on the world twice) is the
	// caller's question.
	ErrNoResponse = errors.New("upstream: connection closed before any byte of the answer (the backend may have processed the message)")
	// ErrUnauthorized: the backend refused the router's own credentials for it (HTTP
	// 401 or 403), or the authorization server refused to give the router a token for
	// it. The error names the backend; the client is told the backend refused the
	// router, never challenged as if its own credentials were at fault.
	ErrUnauthorized = errors.New("upstream: backend refused the router's credentials")
	// ErrProtocol: the backend broke the transport's rules (wrong content type, an
	// endpoint event naming another origin, a renewal answered with an error).
	ErrProtocol = errors.New("upstream: protocol violation")
)

// StatusError is an unexpected HTTP status from a backend. Body holds at most
// maxExcerpt bytes of the response body, for logs and error messages.
type StatusError struct {
	Status  int
	Method  string // the HTTP method of the request that got it
	Backend string // the backend's name
	Body    []byte
	// renewed: a 401 after which a credential has another value to try.
	renewed bool
}

// maxExcerpt bounds StatusError.Body: enough to show a server's error text, small enough
// to log.
const maxExcerpt = 256

// Error implements error.
func (e *StatusError) Error() string {
	s := "upstream: backend "
	if e.Backend != "" {
		s += e.Backend + " "
	}
	if e.Status == 401 || e.Status == 403 {
		s += "refused the router's credentials for it: "
	}
	s += "answered HTTP " + strconv.Itoa(e.Status) + " to " + e.Method
	if len(e.Body) > 0 {
		s += ": " + string(e.Body)
	}
	return s
}

// Is makes gateway and availability statuses match ErrBackendDown: a 502, 503 or 504
// means the backend is not there right now, which callers handle like a refused
// connection. A 401 or 403 matches ErrUnauthorized.
func (e *StatusError) Is(target error) bool {
	switch target {
	case ErrBackendDown:
		return e.Status == 502 || e.Status == 503 || e.Status == 504
	case ErrUnauthorized:
		return e.Status == 401 || e.Status == 403
	}
	return false
}

// isMethod reports whether the scanned message's method is exactly name. An escaped
// method never matches: the router sends plain method names.
func isMethod(m *codec.Message, name string) bool {
	return m.Flags&codec.MethodEscaped == 0 && string(m.Method) == name
}

// RetrySafe is the default policy for re-sending a message whose HTTP exchange failed in a
// way that leaves it unknown whether the backend saw it (a pooled connection that the
// backend had closed). Notifications and responses are safe: a duplicate is ignored or
// harmless. Requests are safe when the method has no side effects or is idempotent;
// tools/call is not, since a tool may act on the world.
func RetrySafe(m *codec.Message) bool {
	switch m.Kind {
	case codec.KindNotification, codec.KindResult, codec.KindError:
		return true
	case codec.KindRequest:
	default:
		return false
	}
	if m.Flags&codec.MethodEscaped != 0 {
		return false
	}
	switch string(m.Method) {
	case "initialize", "ping", "tools/list", "prompts/list", "prompts/get",
		"resources/list", "resources/templates/list", "resources/read",
		"resources/subscribe", "resources/unsubscribe", "completion/complete",
		"logging/setLevel", "server/discover":
		return true
	}
	return false
}

// The transports all satisfy Conn.
var (
	_ Conn = (*HTTPConn)(nil)
	_ Conn = (*SSEConn)(nil)
	_ Conn = (*Instance)(nil)
)
