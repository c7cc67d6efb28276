package upstream

import (
	"cmp"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/url"
	"runtime"
	"sort"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/internal/defaults"
	"github.com/mcprouter/mcprouter/internal/mono"
	"github.com/mcprouter/mcprouter/transport/logsafe"
	"github.com/mcprouter/mcprouter/transport/readahead"
)

// HTTPOptions configures DialHTTP and DialSSE. The zero value is ready to use: every
// field has a documented default.
type HTTPOptions struct {
	// Name is the backend's name, used in logs and error messages.
	Name string
	// Headers are sent with every request, as they are. Transport headers (Accept,
	// Content-Type, Mcp-Session-Id, MCP-Protocol-Version, Last-Event-ID) are set by the
	// client and must not be listed here. Secrets belong in Credentials, which are
	// never printed and can change while the Conn lives.
	Headers map[string]string
	// Credentials are the router's own credentials for the backend, asked for their
	// value on every request (see Credential). Their headers must differ from Headers'
	// and from the transport's.
	Credentials []Credential
	// MaxConns bounds the pooled connections to the backend, streams included (the GET
	// stream holds one for as long as it is open, every SSE reply one for its duration).
	// Default 64.
	MaxConns int
	// ConnWait is how long a request waits for a free pooled connection when all
	// MaxConns are busy, before failing; ctx's deadline shortens it. Default 10s.
	ConnWait time.Duration
	// MaxMessage bounds one message from the backend (a JSON body or one SSE event).
	// Default 8 MiB.
	MaxMessage int
	// DialTimeout bounds one TCP (and TLS) connect. Default 5s.
	DialTimeout time.Duration
	// IdleTimeout closes pooled connections idle this long. It stays below the 5s
	// keep-alive timeout of Node's HTTP server, the most common MCP server runtime, so
	// that we close idle connections before the backend does, which avoids sending on a
	// connection the backend is closing. Default 4s.
	IdleTimeout time.Duration
	// Linger is how long an SSE reply is still read after its response arrived, waiting
	// for the end of the stream so that the connection can be reused. Servers close the
	// stream right after the response; one that does not is cut after Linger. Default
	// 100ms.
	Linger time.Duration
	// InitTimeout bounds a transparent session renewal (initialize and initialized).
	// Default 30s.
	InitTimeout time.Duration
	// ReconnectMin and ReconnectMax bound the backoff between attempts to reopen a
	// stream: the GET stream, a resumed SSE reply, the legacy SSE stream. Defaults 250ms
	// and 30s. A server's SSE retry field takes precedence after a clean end of stream.
	ReconnectMin, ReconnectMax time.Duration
	// ReconnectAttempts is how many consecutive attempts to resume an SSE reply or to
	// re-establish a legacy SSE stream may fail before giving up. Default 8.
	ReconnectAttempts int
	// NoRenew disables transparent session renewal: a lost session kills the Conn with
	// ErrSessionExpired and EventExpired, and the router re-initializes on a new Conn.
	NoRenew bool
	// RetrySafe decides whether a message may be sent a second time when its first
	// attempt failed on a pooled connection the backend had closed, so that it is
	// unknown whether the backend saw it. Default: the package's RetrySafe.
	RetrySafe func(m *codec.Message) bool
	// Pipeline, when positive, sends POSTs with HTTP/1.1 pipelining over at most this
	// many connections (GETs and DELETEs keep the pool): requests that arrive together
	// go out in one write and their responses come back in one read, which cuts the
	// system calls per call on both sides under load, at the price of head-of-line
	// blocking behind a slow request (see pipeline). For backends whose calls are
	// short; PipelineShort makes it safe for any backend. Default 0: off, or 2 with
	// PipelineShort.
	Pipeline int
	// PipelineDepth bounds the requests outstanding on one pipelined connection; past
	// it requests use the pool. Default 32.
	PipelineDepth int
	// PipelineWindow: a pipelined connection takes a request behind others only while
	// the oldest of them has waited less than this, so that a call that turns out slow
	// stops collecting requests behind it after the window. Default 1ms.
	PipelineWindow time.Duration
	// PipelineShort restricts the pipelined connections to calls predicted to be
	// short, which makes pipelining safe to leave on: a call goes on a pipelined
	// connection only when the calls of its kind (its method, and the tool, prompt or
	// resource it names) on this backend typically took at most PipelineShortBound and
	// none of its last 1000 was slow (over twenty times that, given up, an event stream),
	// only while 2 other calls are in flight to the backend (PipelineLone) and recent
	// pipelined writes carried 1.5 calls each (else while 8 are), and it
	// queues behind others only while their typical times add up to at most
	// PipelineWindow. Other calls use the pool (see CallTimes). With it, Pipeline
	// defaults to 2.
	PipelineShort bool
	// PipelineLone lets a call take a pipelined connection in PipelineShort mode
	// whatever else is in flight. Without it (the default) a call tries the pipeline
	// only while at least 2 other calls are in flight to the backend: below that calls
	// share no write, and pipelining costs more than it saves (see pipeline.enter).
	PipelineLone bool
	// PipelineShortBound is the longest a kind's calls may typically take to count as
	// short (see PipelineShort). Default 1ms.
	PipelineShortBound time.Duration
	// CallTimes is the record PipelineShort predicts from; the Conns of one backend may
	// share one. Default: a record of the Conn's own.
	CallTimes *CallTimes
	// PipeStats counts the POSTs pipelined, and those sent on the pool by why (see
	// Pipelining); the Conns of one backend may share one, as CallTimes. Default:
	// counters of the Conn's own.
	PipeStats *PipeStats
	// TLSConfig is used for https URLs; nil uses Go's defaults.
	TLSConfig *tls.Config
	// Logger receives the client's logs, with attribute backend=Name. Default
	// slog.Default().
	Logger *slog.Logger
}

// Defaults for HTTPOptions.
const (
	DefaultMaxConns     = 64
	DefaultMaxMessage   = 8 << 20
	defaultConnWait     = 10 * time.Second
	defaultDialTimeout  = 5 * time.Second
	defaultIdleTimeout  = 4 * time.Second
	defaultLinger       = 100 * time.Millisecond
	defaultInitTimeout  = 30 * time.Second
	defaultReconnectMin = 250 * time.Millisecond
	defaultReconnectMax = 30 * time.Second
	defaultReconnects   = 8
)

// withDefaults returns a copy of o with zero fields defaulted.
func (o HTTPOptions) withDefaults() HTTPOptions {
	o.Name = cmp.Or(o.Name, "backend")
	o.MaxConns = defaults.Positive(o.MaxConns, DefaultMaxConns)
	o.ConnWait = defaults.Positive(o.ConnWait, defaultConnWait)
	o.MaxMessage = defaults.Positive(o.MaxMessage, DefaultMaxMessage)
	o.DialTimeout = defaults.Positive(o.DialTimeout, defaultDialTimeout)
	o.IdleTimeout = defaults.Positive(o.IdleTimeout, defaultIdleTimeout)
	o.Linger = defaults.Positive(o.Linger, defaultLinger)
	o.InitTimeout = defaults.Positive(o.InitTimeout, defaultInitTimeout)
	o.ReconnectMin, o.ReconnectMax = backoffRange(o.ReconnectMin, o.ReconnectMax, defaultReconnectMin, defaultReconnectMax)
	o.ReconnectAttempts = defaults.Positive(o.ReconnectAttempts, defaultReconnects)
	o.PipelineDepth = defaults.Positive(o.PipelineDepth, defaultPipelineDepth)
	o.PipelineWindow = defaults.Positive(o.PipelineWindow, defaultPipelineWindow)
	if o.PipeStats == nil {
		o.PipeStats = NewPipeStats()
	}
	if o.PipelineShort {
		o.Pipeline = defaults.Positive(o.Pipeline, defaultShortPipeline)
		o.PipelineShortBound = defaults.Positive(o.PipelineShortBound, defaultShortBound)
		if o.CallTimes == nil {
			o.CallTimes = NewCallTimes()
		}
	}
	o.Logger = cmp.Or(o.Logger, slog.Default())
	return o
}

// backoffRange defaults the bounds of a backoff (the HTTP clients' reconnects, a stdio
// child's restarts): lo as defaults.Positive, and hi, when below lo, to defHi or lo if larger,
// so that a configured minimum alone is never capped below itself.
func backoffRange(lo, hi, defLo, defHi time.Duration) (time.Duration, time.Duration) {
	lo = defaults.Positive(lo, defLo)
	if hi < lo {
		hi = max(defHi, lo)
	}
	return lo, hi
}

// retrySafe applies the RetrySafe policy. It takes a copy of the scan so that the
// caller's stays on its stack: this runs only after a failed exchange.
func (o *HTTPOptions) retrySafe(m *codec.Message) bool {
	if o.RetrySafe == nil {
		return RetrySafe(m)
	}
	mc := *m
	return o.RetrySafe(&mc)
}

// reservedHeaders are set by the clients themselves.
var reservedHeaders = map[string]bool{
	"accept": true, "content-type": true, "content-length": true, "host": true,
	"mcp-session-id": true, "mcp-protocol-version": true, "last-event-id": true,
	"connection": true, "transfer-encoding": true,
}

// header is one extra request header, kept as a slice so that the hot path does not
// iterate a map.
type header struct{ name, value string }

// validate checks o and flattens its headers.
func (o *HTTPOptions) validate() ([]header, error) {
	hs := make([]header, 0, len(o.Headers))
	for k, v := range o.Headers {
		if reservedHeaders[lowerASCII(k)] {
			return nil, errors.New("upstream: header " + k + " is set by the client and cannot be configured")
		}
		hs = append(hs, header{k, v})
	}
	sort.Slice(hs, func(i, j int) bool { return hs[i].name < hs[j].name })
	return hs, o.validateCredentials()
}

func lowerASCII(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// setup checks what both HTTP transports need (a Sink, valid options, an http or
// https URL), fills b in with the defaulted options, the configured headers, the Sink
// and the logger, and returns the URL and the address to dial. dial names the caller
// in errors.
func (b *httpBase) setup(dial, rawURL string, opts HTTPOptions, sink Sink) (*url.URL, string, error) {
	if sink == nil {
		return nil, "", errors.New("upstream: " + dial + " needs a Sink")
	}
	opts = opts.withDefaults()
	headers, err := opts.validate()
	if err != nil {
		return nil, "", err
	}
	u, addr, err := parseHTTPURL(rawURL)
	if err != nil {
		return nil, "", err
	}
	b.opts, b.headers, b.sink = opts, headers, sink
	b.log = opts.Logger.With("backend", opts.Name)
	b.badLog = logsafe.Logger(b.log, badLinesPerSec, badBurst)
	b.lifecycle.init()
	return u, addr, nil
}

// httpBase is what both HTTP transports (HTTPConn, SSEConn) are built on: the
// defaulted options and their checked headers, the Sink, the logger, the recorded
// handshake, the waiters for replies, and the life and Close state. setup fills it
// in the Dial functions; it is read-only after that but for what its parts guard.
type httpBase struct {
	lifecycle
	closer
	opts    HTTPOptions
	headers []header
	sink    Sink
	log     *slog.Logger
	badLog  *slog.Logger // log, rate-limited for what a backend sends broken
	hs      handshake
	wait    waiters
	hc      *fasthttp.HostClient // the requests (POSTs; GET and DELETE too for HTTPConn)
	conns   connSet              // hc's connections
}

// badLinesPerSec and badBurst rate-limit the logs of broken messages from one backend,
// which a hostile backend could otherwise send as fast as it likes.
const badLinesPerSec, badBurst = 20, 100

// parseURI parses the backend URL u into dst, the form fasthttp requests are built from.
func parseURI(dst *fasthttp.URI, u *url.URL) error {
	if err := dst.Parse(nil, []byte(u.String())); err != nil {
		return errors.New("upstream: bad backend URL: " + err.Error())
	}
	return nil
}

// parseHTTPURL checks that raw is an absolute http or https URL and returns it with the
// address (host:port) to dial.
func parseHTTPURL(raw string) (*url.URL, string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, "", errors.New("upstream: bad backend URL: " + err.Error())
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, "", errors.New("upstream: backend URL must be http or https: " + raw)
	}
	if u.Host == "" {
		return nil, "", errors.New("upstream: backend URL has no host: " + raw)
	}
	if u.User != nil {
		return nil, "", errors.New("upstream: backend URL must not carry credentials; use Headers")
	}
	addr := u.Host
	if u.Port() == "" {
		port := "80"
		if u.Scheme == "https" {
			port = "443"
		}
		addr = net.JoinHostPort(u.Hostname(), port)
	}
	return u, addr, nil
}

// dialError marks a failure to connect: the backend is down or unreachable.
type dialError struct{ err error }

func (e *dialError) Error() string        { return "upstream: connect: " + e.err.Error() }
func (e *dialError) Unwrap() error        { return e.err }
func (e *dialError) Is(target error) bool { return target == ErrBackendDown }

// connSet tracks every connection a client opened, so that Close can interrupt requests
// blocked in fasthttp (which takes no context) by closing their connections.
type connSet struct {
	mu     sync.Mutex
	conns  map[*trackedConn]struct{}
	closed bool
}

type trackedConn struct {
	net.Conn
	set  *connSet
	once sync.Once
	// A connection is used by one exchange at a time (fasthttp's pool hands it over),
	// so these need no lock.
	reused   bool     // a response was read since the last request was written
	lastRead int64    // when, on the monotonic clock (mono.Nanos)
	wrote    bool     // a request was written and nothing read since
	send     sendRead // the request the next Read sends (sendread_unix.go)
	// dl keeps the deadlines fasthttp sets before every exchange until a read or a
	// write has to wait: most writes never do, and the held request's read sets the
	// read deadline only once the request is out.
	dl readahead.Deadlines
}

// idleProbe is how long a pooled connection must have been idle before it is probed for
// a close by the backend. Below it the probe is not worth a system call: a backend
// restart leaves connections idle far longer than this.
var idleProbe = 50 * time.Millisecond

// errStaleConn is a write refused because the backend had closed the pooled connection
// (a restart, an idle timeout). Nothing was sent, so any message may be sent again on a
// new connection.
var errStaleConn = errors.New("upstream: pooled connection closed by the backend")

// Write probes a connection that is being reused after idling: a backend that
// restarted closed it, and a request written into it would be lost in a way that makes
// retrying unsafe. Refusing the write instead lets the request go out on a fresh
// connection.
func (t *trackedConn) Write(b []byte) (int, error) {
	if t.reused {
		t.reused = false
		if time.Duration(mono.Nanos()-t.lastRead) >= idleProbe && peerClosed(t.Conn) {
			return 0, errStaleConn
		}
	}
	t.wrote = true
	if t.send.pending() { // a request written in several parts: the earlier go out now
		if err := t.send.flush(t.Conn); err != nil {
			return 0, err
		}
	}
	if t.send.hold(b) {
		return len(b), nil
	}
	if err := t.dl.Apply(readahead.Write); err != nil {
		return 0, err
	}
	return t.Conn.Write(b)
}

// SetDeadline implements net.Conn (see readahead.Deadlines).
func (t *trackedConn) SetDeadline(d time.Time) error { return t.dl.SetDeadline(d) }

// SetReadDeadline implements net.Conn (see readahead.Deadlines).
func (t *trackedConn) SetReadDeadline(d time.Time) error { return t.dl.SetReadDeadline(d) }

// SetWriteDeadline implements net.Conn (see readahead.Deadlines).
func (t *trackedConn) SetWriteDeadline(d time.Time) error { return t.dl.SetWriteDeadline(d) }

// Read implements net.Conn. The first read after a request sends the request Write held
// back and waits for the answer without trying to read first (sendRead). Without a held
// request it yields first: the answer is rarely there yet (the backend needs the CPU
// the router holds), and the goroutines waiting to run send their own requests
// meanwhile, so that the backend takes more of them per wake-up (router CPU per
// forwarded call 0.97x, bench/RESULTS.md).
func (t *trackedConn) Read(b []byte) (n int, err error) {
	switch {
	case t.send.pending():
		t.wrote = false
		n, err = t.send.read(t.Conn, b)
	case t.wrote:
		t.wrote = false
		runtime.Gosched()
		fallthrough
	default:
		if err = t.dl.Apply(readahead.Read); err == nil {
			n, err = t.Conn.Read(b)
		}
	}
	if n > 0 {
		t.reused, t.lastRead = true, mono.Nanos() // one clock read, not time.Now's two
	}
	return n, err
}

func (t *trackedConn) Close() error {
	t.once.Do(func() {
		t.set.mu.Lock()
		delete(t.set.conns, t)
		t.set.mu.Unlock()
	})
	return t.Conn.Close()
}

// dialer returns a fasthttp DialFuncWithTimeout that tracks its connections.
func (s *connSet) dialer(limit time.Duration) func(addr string, timeout time.Duration) (net.Conn, error) {
	return func(addr string, timeout time.Duration) (net.Conn, error) {
		if timeout <= 0 || timeout > limit {
			timeout = limit
		}
		c, err := net.DialTimeout("tcp", addr, timeout)
		if err != nil {
			return nil, &dialError{err}
		}
		t := &trackedConn{Conn: c, set: s}
		t.dl.Init(c)
		t.send.init(c, &t.dl)
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			_ = c.Close()
			return nil, &dialError{ErrClosed}
		}
		if s.conns == nil {
			s.conns = make(map[*trackedConn]struct{})
		}
		s.conns[t] = struct{}{}
		s.mu.Unlock()
		return t, nil
	}
}

// closeAll closes every tracked connection and refuses new ones.
func (s *connSet) closeAll() { s.closeConns(true) }

// closeConns closes every tracked connection; final refuses new ones too.
func (s *connSet) closeConns(final bool) {
	s.mu.Lock()
	s.closed = s.closed || final
	conns := make([]*trackedConn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
}
