// Package client is the MCP client side of mcpload: sessions over Streamable HTTP
// (session revisions 2025-03-26 to 2025-11-25, and the stateless 2026-07-28 revision),
// the legacy HTTP+SSE transport (2024-11-05) and stdio (one child process per session).
//
// It is built for load generation, not for applications: a Session sends requests whose
// params are already encoded, hands back the raw result bytes and classifies every
// failure (HTTP status, JSON-RPC error code, timeout, transport, protocol) so that the
// caller can count it. Nothing is unmarshalled on the success path; replies are scanned
// with the project codec.
package client

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"time"

	"github.com/mcprouter/mcprouter/codec"
)

// Transport names accepted in Options.Transport.
const (
	HTTP  = "http"  // Streamable HTTP (one endpoint; POST, GET stream, DELETE)
	SSE   = "sse"   // legacy HTTP+SSE: GET stream names a POST endpoint; replies on the stream
	Stdio = "stdio" // newline-delimited JSON over a child process's stdin/stdout
)

// Protocol revisions mcpload knows how to speak.
const (
	Version20241105 = "2024-11-05"
	Version20250326 = "2025-03-26"
	Version20250618 = "2025-06-18"
	Version20251125 = "2025-11-25"
	Version20260728 = "2026-07-28" // stateless: no session, no initialize
)

// KnownVersions lists the revisions above, newest first.
var KnownVersions = []string{Version20260728, Version20251125, Version20250618, Version20250326, Version20241105}

// Options configure a Dialer. The zero value of every field but URL (or Command for
// stdio) has a working default.
type Options struct {
	// Transport is HTTP (default), SSE or Stdio.
	Transport string
	// URL is the MCP endpoint (HTTP) or the SSE stream URL (SSE).
	URL string
	// URLs are further instances of the same Streamable HTTP service (a cluster whose
	// instances share sessions, reached without a balancer). Session i opens on instance
	// i mod n of URL and URLs, and when its instance stops answering (connection refused,
	// or closed before an answer) it moves to the next one with the same session id,
	// its call is sent there, and its stream resumes there with Last-Event-ID (its
	// subscriptions/listen streams are opened again there).
	URLs []string
	// Command is the server command line for Stdio; one process per session.
	Command []string
	// Env is appended to the environment of stdio children.
	Env []string
	// Protocol is the revision requested in initialize. Default: 2025-11-25 for HTTP
	// and stdio, 2024-11-05 for SSE. 2026-07-28 selects the stateless mode over HTTP.
	Protocol string
	// Headers are added to every HTTP request (for example Authorization).
	Headers map[string]string
	// Stream makes each Streamable HTTP session hold its GET stream open, receiving
	// server notifications on it.
	Stream bool
	// Pipeline lets a session that holds its GET stream over plain HTTP send
	// notifications/initialized and its first call (see Dialer.DialCall) before the GET
	// on the stream's connection, in one write (HTTP/1.1 pipelining), instead of each
	// on its own and waiting for its answer. The server must answer pipelined requests,
	// as HTTP/1.1 asks of it.
	Pipeline bool `json:",omitempty"`
	// ClientName and ClientVersion go into clientInfo. Default "mcpload", "dev".
	ClientName, ClientVersion string
	// SourceAddrs are local addresses to open connections from, in turn (see
	// ParseSourceAddrs): on loopback, 127.0.0.2, 127.0.0.3, ... each add a range of
	// ephemeral ports, for more connections to one destination than one address has.
	// Empty: the system chooses.
	SourceAddrs []string `json:",omitempty"`
	// MaxConns bounds the HTTP connections for POSTs. Default 1024.
	MaxConns int
	// MaxMessage bounds one reply or event in bytes. Default 16 MiB.
	MaxMessage int
	// OnNotification, if set, is called for every notification a session receives,
	// from that session's reader goroutine (or from Call, for notifications that come
	// before a reply on a POST's SSE stream). msg and its views are valid only during
	// the call. It must not block.
	OnNotification func(session int, msg *codec.Message, at time.Time) `json:"-"`
}

func (o *Options) withDefaults() (Options, error) {
	c := *o
	if c.Transport == "" {
		c.Transport = HTTP
	}
	if c.Protocol == "" {
		c.Protocol = Version20251125
		if c.Transport == SSE {
			c.Protocol = Version20241105
		}
	}
	if c.ClientName == "" {
		c.ClientName = "mcpload"
	}
	if c.ClientVersion == "" {
		c.ClientVersion = "dev"
	}
	if c.MaxConns <= 0 {
		c.MaxConns = 1024
	}
	if c.MaxMessage <= 0 {
		c.MaxMessage = 16 << 20
	}
	known := false
	for _, v := range KnownVersions {
		known = known || v == c.Protocol
	}
	if !known {
		return c, fmt.Errorf("client: unknown protocol revision %q (known: %v)", c.Protocol, KnownVersions)
	}
	switch c.Transport {
	case HTTP, SSE:
		for _, raw := range append([]string{c.URL}, c.URLs...) {
			u, err := url.Parse(raw)
			if err != nil {
				return c, fmt.Errorf("client: bad URL: %w", err)
			}
			if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
				return c, fmt.Errorf("client: URL %q must be http(s)://host[:port]/path", raw)
			}
		}
		if len(c.URLs) > 0 && c.Transport != HTTP {
			return c, errors.New("client: several URLs (instances of one service) need the Streamable HTTP transport")
		}
		if c.Protocol == Version20260728 && c.Transport != HTTP {
			return c, fmt.Errorf("client: protocol %s is stateless Streamable HTTP only", c.Protocol)
		}
	case Stdio:
		if len(c.Command) == 0 {
			return c, errors.New("client: stdio transport needs a command")
		}
		if c.Protocol == Version20260728 {
			return c, fmt.Errorf("client: protocol %s is not supported over stdio by mcpload yet", c.Protocol)
		}
	default:
		return c, fmt.Errorf("client: unknown transport %q (http, sse, stdio)", c.Transport)
	}
	return c, nil
}

// Session is one MCP client session, already initialized.
//
// Concurrency: Call and Notify may be called from several goroutines at once (mcpload
// itself runs one call at a time per session, but replies to server requests can
// overlap). Close may be called once, concurrently with in-flight calls, which then fail
// with a transport error.
type Session interface {
	// Call sends a request and waits for its reply until deadline. On success
	// rep.Result holds the raw result. A failure is always an *Error.
	Call(req *Request, deadline time.Time, rep *Reply) error
	// Notify sends a notification.
	Notify(method string, params []byte, deadline time.Time) error
	// Close ends the session: DELETE for Streamable HTTP, closing the stream for SSE,
	// closing stdin (then killing at the deadline) for stdio.
	Close(deadline time.Time) error
	// Info describes the session.
	Info() Info
}

// Request is one call to make.
type Request struct {
	// Method is the JSON-RPC method, for example "tools/call".
	Method string
	// Name is the tool or prompt name, or the resource URI, that the request is
	// about. It is sent as the Mcp-Name header in the stateless revision so that
	// routers can route without reading the body. Optional otherwise.
	Name []byte
	// Params is the raw params object, or nil.
	Params []byte
}

// Reply receives a call's outcome. Reuse it across calls to reuse its buffer.
type Reply struct {
	// Result is the raw result value; it aliases the Reply's own buffer and is valid
	// until the Reply is used again.
	Result []byte
	// Status is the HTTP status of the exchange (0 for stdio).
	Status int
	buf    []byte
}

func (r *Reply) set(status int, result []byte) {
	r.Status = status
	r.buf = append(r.buf[:0], result...)
	r.Result = r.buf
}

// Info describes an established session.
type Info struct {
	Protocol  string // negotiated revision
	SessionID string // Mcp-Session-Id, or the legacy endpoint's session, if any
	Server    string // serverInfo.name
	// StreamOpen says whether a standalone server-to-client stream is attached.
	StreamOpen bool
	// URL is the instance the session uses now and Moves how many times it moved to
	// another (Options.URLs).
	URL   string
	Moves int64
}

// Class is the kind of a failure, for counting errors by class.
type Class uint8

const (
	ClassNone      Class = iota
	ClassHTTP            // a non-2xx HTTP status; Code is the status
	ClassJSONRPC         // a JSON-RPC error response; Code is the error code
	ClassTool            // a tools/call result with isError: true (set by callers)
	ClassTimeout         // no reply before the deadline
	ClassTransport       // connection or process failure, stream closed
	ClassProtocol        // a reply that breaks JSON-RPC or MCP rules
)

var classNames = [...]string{"ok", "http", "jsonrpc", "tool_error", "timeout", "transport", "protocol"}

func (c Class) String() string {
	if int(c) < len(classNames) {
		return classNames[c]
	}
	return "class" + strconv.Itoa(int(c))
}

// Error is every failure a Session reports.
type Error struct {
	Class Class
	Code  int    // HTTP status or JSON-RPC code, per Class
	Msg   string // detail for humans
	Err   error  // underlying error, if any
	// Status is the HTTP status when the failure came with one. A non-2xx answer whose
	// body is a JSON-RPC error is classed by its JSON-RPC code (so that the same
	// failure counts the same over every transport) and keeps the status here.
	Status int
}

func (e *Error) Error() string {
	s := e.Class.String()
	if e.Class == ClassHTTP || e.Class == ClassJSONRPC {
		s += " " + strconv.Itoa(e.Code)
	}
	if e.Status != 0 && e.Class != ClassHTTP {
		s += " (HTTP " + strconv.Itoa(e.Status) + ")"
	}
	if e.Msg != "" {
		s += ": " + e.Msg
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *Error) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrSessionExpired) and errors.Is(err, ErrTimeout) work.
func (e *Error) Is(target error) bool {
	switch target {
	case ErrTimeout:
		return e.Class == ClassTimeout
	case ErrSessionExpired:
		return e.Err == ErrSessionExpired
	}
	return false
}

var (
	// ErrTimeout matches failures of class ClassTimeout.
	ErrTimeout = errors.New("client: timeout")
	// ErrSessionExpired is wrapped when a server answers 404 to a request that
	// carried a session id: the session is gone and must be re-established.
	ErrSessionExpired = errors.New("client: session expired")
	// ErrClosed is wrapped when the session was closed by the caller.
	ErrClosed = errors.New("client: session closed")
	// ErrStreamUnsupported is wrapped when the server refuses the GET stream (405).
	ErrStreamUnsupported = errors.New("client: server offers no GET stream")
)

func transportErr(msg string, err error) *Error {
	return &Error{Class: ClassTransport, Msg: msg, Err: err}
}

func protocolErr(msg string) *Error { return &Error{Class: ClassProtocol, Msg: msg} }

var errTimeout = &Error{Class: ClassTimeout, Err: ErrTimeout}
