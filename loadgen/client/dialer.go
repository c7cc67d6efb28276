package client

import (
	"bytes"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/loadgen/internal/wire"
)

// Dialer establishes sessions. It owns the HTTP connection pools shared by its sessions.
// A Dialer is safe for concurrent use.
type Dialer struct {
	o Options

	// POSTs and DELETEs go through fasthttp: the hot path of a load generator has to be
	// cheap. Long-lived streams each hold a connection of their own: over plain HTTP a
	// GET stream opens with fasthttp's request and response objects on a bare
	// connection (Dialer.pipelined), the legacy and subscriptions/listen streams with
	// net/http's request type on one (doStream); over HTTPS all go through net/http.
	mu      sync.Mutex
	clients map[string]*fasthttp.HostClient // by scheme://host
	streams *http.Client
	src     *sourceDialer // every connection, POST pools and streams alike
	meta    []byte        // stateless revision: the "_meta" member every request carries
	// the reading state of calls in progress (see scratch), shared by the sessions
	scratches sync.Pool
	// the instances in the order of a session that starts on each (see instances)
	orders sync.Once
	order  [][]instance
	// initialize's params, the same for every session, and the last result read
	initParams []byte
	lastInit   atomic.Pointer[initRead]
}

// NewDialer validates o and prepares the connection pools.
func NewDialer(o Options) (*Dialer, error) {
	c, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	d := &Dialer{o: c, clients: make(map[string]*fasthttp.HostClient)}
	if d.src, err = newSourceDialer(c.SourceAddrs, 10*time.Second); err != nil {
		return nil, err
	}
	if c.Transport != Stdio {
		tr := &http.Transport{
			Proxy:               nil, // loopback benchmarking must not detour via a proxy
			MaxIdleConnsPerHost: c.MaxConns,
			DisableCompression:  true,
			IdleConnTimeout:     30 * time.Second,
			DialContext:         d.src.DialContext,
		}
		d.streams = &http.Client{Transport: tr}
	}
	if c.Protocol == Version20260728 {
		d.meta = statelessMeta(c)
	}
	d.initParams = initializeParams(&d.o)
	return d, nil
}

// Options returns the effective options (defaults applied).
func (d *Dialer) Options() Options { return d.o }

// Close releases idle connections. Sessions must be closed first.
func (d *Dialer) Close() {
	if d.streams != nil {
		d.streams.CloseIdleConnections()
	}
	d.mu.Lock()
	for _, hc := range d.clients {
		hc.CloseIdleConnections()
	}
	d.mu.Unlock()
}

// Dial establishes session number index (the number is passed back to
// OnNotification). For the session revisions it performs initialize and
// notifications/initialized, and opens the GET stream when Options.Stream is set; for
// the stateless revision it sends server/discover.
func (d *Dialer) Dial(index int, deadline time.Time) (Session, error) {
	return d.DialCall(index, deadline, nil, nil)
}

// DialCall establishes session number index as Dial does, then makes the call r (if
// not nil) on it, rep taking its reply; a session whose call fails is closed. With
// Options.Pipeline, a Streamable HTTP session that holds its GET stream over plain HTTP
// sends notifications/initialized, r and the GET in one write on the stream's
// connection, where Dial then Call wait for each answer in turn: per session, two
// writes and two round trips fewer for the client and the server. r is then carried
// out just before the stream opens, so a notification it causes at once may come
// before the stream is there to take it.
func (d *Dialer) DialCall(index int, deadline time.Time, r *Request, rep *Reply) (Session, error) {
	var s Session
	var err error
	switch d.o.Transport {
	case SSE:
		s, err = d.dialSSE(index, deadline)
	case Stdio:
		s, err = d.dialStdio(index, deadline)
	default:
		return d.dialHTTP(index, deadline, r, rep)
	}
	if err != nil {
		return nil, err
	}
	return callFirst(s, r, deadline, rep)
}

// hostClient returns the pooled fasthttp client for u's scheme and host.
func (d *Dialer) hostClient(u *url.URL) *fasthttp.HostClient {
	key := u.Scheme + "://" + u.Host
	d.mu.Lock()
	defer d.mu.Unlock()
	if hc := d.clients[key]; hc != nil {
		return hc
	}
	addr := u.Host
	if u.Port() == "" {
		if u.Scheme == "https" {
			addr += ":443"
		} else {
			addr += ":80"
		}
	}
	hc := &fasthttp.HostClient{
		Addr:                addr,
		Name:                d.o.ClientName,
		IsTLS:               u.Scheme == "https",
		MaxConns:            d.o.MaxConns,
		MaxConnWaitTimeout:  time.Minute, // wait for a free connection; the call deadline still applies
		MaxIdleConnDuration: 30 * time.Second,
		MaxResponseBodySize: d.o.MaxMessage,
		Dial:                d.src.Dial,
		ReadBufferSize:      16 << 10,
		WriteBufferSize:     16 << 10,
		// Not idempotent: never silently retry a POST, it would be counted once but
		// executed twice.
		MaxIdemponentCallAttempts: 1,
		RetryIfErr: func(*fasthttp.Request, int, error) (bool, bool) {
			return false, false
		},
	}
	if hc.IsTLS {
		hc.TLSConfig = &tls.Config{ServerName: u.Hostname(), MinVersion: tls.VersionTLS12}
	}
	d.clients[key] = hc
	return hc
}

// initializeParams encodes the initialize params.
func initializeParams(o *Options) []byte {
	b := []byte(`{"protocolVersion":`)
	b = codec.AppendString(b, o.Protocol)
	b = append(b, `,"capabilities":{"roots":{}},"clientInfo":{"name":`...)
	b = codec.AppendString(b, o.ClientName)
	b = append(b, `,"version":`...)
	b = codec.AppendString(b, o.ClientVersion)
	return append(b, "}}"...)
}

// statelessMeta encodes the "_meta" member that every request carries in the stateless
// revision: protocol version, client info and capabilities travel with each request.
func statelessMeta(o Options) []byte {
	b := []byte(`"_meta":{"io.modelcontextprotocol/protocolVersion":`)
	b = codec.AppendString(b, o.Protocol)
	b = append(b, `,"io.modelcontextprotocol/clientInfo":{"name":`...)
	b = codec.AppendString(b, o.ClientName)
	b = append(b, `,"version":`...)
	b = codec.AppendString(b, o.ClientVersion)
	return append(b, `},"io.modelcontextprotocol/clientCapabilities":{}}`...)
}

// appendWithMeta appends params with the member meta inserted first.
func appendWithMeta(dst, params, meta []byte) []byte {
	dst = append(dst, '{')
	dst = append(dst, meta...)
	p := bytes.TrimSpace(params)
	if len(p) < 2 || p[0] != '{' {
		return append(dst, '}')
	}
	inner := bytes.TrimSpace(p[1 : len(p)-1])
	if len(inner) > 0 {
		dst = append(dst, ',')
		dst = append(dst, inner...)
	}
	return append(dst, '}')
}

// handshake runs initialize + notifications/initialized over s and records the result
// in info.
func handshake(s Session, d *Dialer, deadline time.Time, info *Info) error {
	if err := initialize(s, d, deadline, info); err != nil {
		return err
	}
	return s.Notify("notifications/initialized", nil, deadline)
}

// initialize runs initialize over s and records the result in info.
func initialize(s Session, d *Dialer, deadline time.Time, info *Info) error {
	var rep Reply
	req := Request{Method: "initialize", Params: d.initParams}
	if err := s.Call(&req, deadline, &rep); err != nil {
		return err
	}
	r := d.initResult(rep.Result)
	if r.protocol == "" {
		return protocolErr("initialize result has no protocolVersion")
	}
	info.Protocol, info.Server = r.protocol, r.server
	return nil
}

// initRead is what a session takes from an initialize result.
type initRead struct {
	result           []byte
	protocol, server string
}

// initResult reads an initialize result. A server answers every session's initialize
// alike, so the last one read is kept and an equal result is not parsed again: the
// sessions share its strings.
func (d *Dialer) initResult(result []byte) *initRead {
	if r := d.lastInit.Load(); r != nil && bytes.Equal(r.result, result) {
		return r
	}
	r := &initRead{result: bytes.Clone(result), protocol: wire.StringField(result, "protocolVersion"),
		server: wire.StringField(wire.Field(result, "serverInfo"), "name")}
	d.lastInit.Store(r)
	return r
}

// bodyPool holds request encoding buffers.
var bodyPool = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

func getBody() *[]byte { return bodyPool.Get().(*[]byte) }

func putBody(b *[]byte) {
	if cap(*b) > 1<<20 {
		return // oversized buffers are dropped, not pooled
	}
	*b = (*b)[:0]
	bodyPool.Put(b)
}

// isDeadline reports whether err is a timeout.
func isDeadline(err error) bool {
	if errors.Is(err, fasthttp.ErrTimeout) || errors.Is(err, fasthttp.ErrDialTimeout) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
