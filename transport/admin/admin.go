// Package admin is mcprouter's admin listener: the operator's side door, off the MCP
// port (loopback by default). It serves
//
//	/metrics        Prometheus text format, from a registry passed in
//	/healthz        200 while the process is alive
//	/readyz         200 when the router should receive traffic, 503 with the reason otherwise
//	/               the live status page (self-contained: no external script, style or font)
//	/events         the status page's updates, one JSON object per second over SSE, the
//	                last two minutes of them first
//	/debug/pprof/   Go profiling, only when enabled
//
// It is plain net/http: nothing here is on the request path of MCP traffic, and the
// Prometheus handler and pprof are written for it.
package admin

import (
	"context"
	_ "embed"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Config configures the admin listener. Zero values take the defaults.
type Config struct {
	// Addr is the listen address. Default 127.0.0.1:8081.
	Addr string
	// Gatherer is the registry /metrics exposes. Nil serves an empty exposition.
	Gatherer prometheus.Gatherer
	// Ready reports whether the router should receive traffic: nil for ready, or why
	// not. Nil means always ready.
	Ready func() error
	// Notes, when not nil, returns what /readyz's body adds whatever the verdict ("" for
	// nothing): conditions worth an operator's eye that do not stop traffic, such as a
	// refused configuration reload while the previous configuration keeps running.
	Notes func() string
	// Pprof serves /debug/pprof/. Off by default: profiles expose internals and cost CPU.
	Pprof bool
	// Status feeds the status page: called once, when the server starts serving (or
	// at its first /events client), it returns the function that appends each update
	// (one JSON object) to dst. That function is called once per Interval from one
	// goroutine, whether anyone watches or not, and its updates are shared by every
	// viewer: so the page has a past to draw from its first second, and ten viewers
	// cost one snapshot per Interval, not ten. Nil serves no page.
	Status func() func(dst []byte) []byte
	// Interval is the period of status updates. Default 1s.
	Interval time.Duration
	// History is how many updates are kept for a page that opens (or reconnects):
	// default 120, the two minutes the page's chart shows at the default Interval.
	History int
	// MaxViewers bounds concurrent /events clients (each costs a goroutine and a
	// snapshot per Interval). Default 32.
	MaxViewers int
	// Logger receives the listener's logs. Default slog.Default().
	Logger *slog.Logger
	// AllowedHosts are the Host names (without port) accepted besides the loopback
	// names and Addr's own host; any other Host gets 421 (DNS rebinding: a browser
	// page on another site must not read the metrics or the status page).
	AllowedHosts []string
}

// DefaultAddr is the default admin listen address: loopback, next to the MCP default.
const DefaultAddr = "127.0.0.1:8081"

func (c *Config) defaults() {
	if c.Addr == "" {
		c.Addr = DefaultAddr
	}
	if c.Interval <= 0 {
		c.Interval = time.Second
	}
	if c.MaxViewers <= 0 {
		c.MaxViewers = 32
	}
	if c.History <= 0 {
		c.History = 120
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

//go:embed status.html
var statusPage []byte

// Server is a running (or ready to run) admin listener.
type Server struct {
	cfg     Config
	handler http.Handler
	viewers chan struct{} // semaphore of /events clients
	closing chan struct{} // closed by Shutdown: ends every /events stream and the sampler
	once    sync.Once
	history *history  // the status updates kept for viewers
	sampler sync.Once // starts sample

	mu     sync.Mutex
	ln     net.Listener
	srv    *http.Server
	served chan error
}

// New returns an admin server; Listen or Serve starts it.
func New(cfg Config) *Server {
	cfg.defaults()
	s := &Server{cfg: cfg, viewers: make(chan struct{}, cfg.MaxViewers), closing: make(chan struct{}),
		history: newHistory(cfg.History)}
	s.handler = hostCheck(s.routes(), cfg.Addr, cfg.AllowedHosts)
	return s
}

// hostCheck answers 421 Misdirected Request to a request whose Host is not one of the
// names this listener is known by: the loopback names, its own listen host, and
// allowed. 421 rather than 403: the client is not refused for who it is; the request
// names a server this one is not (RFC 9110, 15.5.20), which is what a DNS rebinding
// page does.
func hostCheck(next http.Handler, addr string, allowed []string) http.Handler {
	names := map[string]bool{"localhost": true, "127.0.0.1": true, "::1": true}
	if host, _, err := net.SplitHostPort(addr); err == nil && host != "" {
		if ip := net.ParseIP(host); ip == nil || !ip.IsUnspecified() {
			names[strings.ToLower(host)] = true
		}
	}
	for _, h := range allowed {
		names[strings.ToLower(h)] = true
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := r.Host
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		host = strings.ToLower(strings.Trim(host, "[]"))
		if !names[host] {
			plain(w, http.StatusMisdirectedRequest, "host not served here\n")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// Handler returns the admin endpoints (for tests, or to mount elsewhere).
func (s *Server) Handler() http.Handler { return s.handler }

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	g := s.cfg.Gatherer
	if g == nil {
		g = prometheus.NewRegistry()
	}
	mux.Handle("GET /metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{
		ErrorHandling: promhttp.ContinueOnError, // a broken collector must not hide the rest
		ErrorLog:      slogErrorLog{s.cfg.Logger},
		// Scrapes are serialized by Prometheus; a few at once is plenty, more is abuse.
		MaxRequestsInFlight: 4,
		Timeout:             10 * time.Second,
	}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		plain(w, http.StatusOK, "ok\n")
	})
	mux.HandleFunc("GET /readyz", s.readyz)
	if s.cfg.Status != nil {
		mux.HandleFunc("GET /{$}", s.page)
		mux.HandleFunc("GET /events", s.events)
	}
	if s.cfg.Pprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	return mux
}

func plain(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write([]byte(body))
}

func (s *Server) readyz(w http.ResponseWriter, _ *http.Request) {
	select {
	case <-s.closing:
		plain(w, http.StatusServiceUnavailable, "not ready: shutting down\n")
		return
	default:
	}
	if s.cfg.Ready != nil {
		if err := s.cfg.Ready(); err != nil {
			plain(w, http.StatusServiceUnavailable, "not ready: "+err.Error()+"\n"+s.notes())
			return
		}
	}
	plain(w, http.StatusOK, "ready\n"+s.notes())
}

// notes is Config.Notes' text as lines of /readyz's body.
func (s *Server) notes() string {
	if s.cfg.Notes == nil {
		return ""
	}
	if n := s.cfg.Notes(); n != "" {
		return n + "\n"
	}
	return ""
}

// pageCSP forbids the page anything beyond itself: its inline script and style, and
// its own event stream. That is the "self-contained" promise, enforced by the browser.
const pageCSP = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

func (s *Server) page(w http.ResponseWriter, _ *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", pageCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-cache")
	w.Write(statusPage)
}

// events streams the status updates: the kept ones at once (only those after
// Last-Event-ID when the page reconnects), then each new one, until the client leaves
// or the server shuts down.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	select {
	case s.viewers <- struct{}{}:
		defer func() { <-s.viewers }()
	default:
		w.Header().Set("Retry-After", "5")
		plain(w, http.StatusServiceUnavailable, "too many status viewers\n")
		return
	}
	s.startSampler()
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)

	// Not a number (or absent): nothing seen yet.
	seen, _ := strconv.ParseUint(r.Header.Get("Last-Event-ID"), 10, 64)
	// The client reconnects after twice the interval if the stream breaks.
	buf := append([]byte("retry: "), strconv.Itoa(int(2*s.cfg.Interval/time.Millisecond))...)
	buf = append(buf, "\n\n"...)
	for {
		var added <-chan struct{}
		buf, seen, added = s.history.appendSince(buf, seen)
		if len(buf) > 0 {
			// A client that stops reading must not hold the goroutine forever.
			rc.SetWriteDeadline(time.Now().Add(10 * s.cfg.Interval))
			if _, err := w.Write(buf); err != nil {
				return
			}
			if err := rc.Flush(); err != nil {
				return
			}
		}
		buf = buf[:0]
		select {
		case <-added:
		case <-r.Context().Done():
			return
		case <-s.closing:
			return
		}
	}
}

// startSampler starts sample, once: when the server starts serving, or at the first
// viewer of a handler mounted elsewhere.
func (s *Server) startSampler() {
	if s.cfg.Status == nil {
		return
	}
	s.sampler.Do(func() { go s.sample(s.cfg.Status()) })
}

// sample adds an update of the one status feed to the history at once and then every
// Interval, until Shutdown.
func (s *Server) sample(next func([]byte) []byte) {
	t := time.NewTicker(s.cfg.Interval)
	defer t.Stop()
	var buf []byte
	for {
		buf = s.history.add(next(buf))
		select {
		case <-t.C:
		case <-s.closing:
			return
		}
	}
}

// Listen opens the listener on Config.Addr and serves in the background.
func (s *Server) Listen() error {
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return err
	}
	s.Serve(ln)
	return nil
}

// Serve serves on ln in the background until Shutdown.
func (s *Server) Serve(ln net.Listener) {
	srv := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          slogErrorLog{s.cfg.Logger}.std(),
		// Profiles (/debug/pprof/profile?seconds=N) write for as long as they sample, so
		// no server-wide WriteTimeout; /events sets its own deadlines.
	}
	served := make(chan error, 1)
	s.mu.Lock()
	s.ln, s.srv, s.served = ln, srv, served
	s.mu.Unlock()
	go func() { served <- srv.Serve(ln) }()
	// The page's history starts now, not when someone first looks.
	s.startSampler()
}

// Addr is the listener's address ("" before Listen).
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return ""
	}
	return s.ln.Addr().String()
}

// Shutdown ends the status streams, stops accepting connections and waits (until ctx
// ends) for the requests being served.
func (s *Server) Shutdown(ctx context.Context) error {
	s.once.Do(func() { close(s.closing) })
	s.mu.Lock()
	srv, served := s.srv, s.served
	s.mu.Unlock()
	if srv == nil {
		return nil
	}
	err := srv.Shutdown(ctx)
	if err != nil {
		srv.Close()
	}
	if serr := <-served; serr != nil && !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	return err
}
