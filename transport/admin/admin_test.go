package admin

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// waitLimit bounds every wait of these tests; nothing here expects speed.
const waitLimit = 20 * time.Second

func get(t *testing.T, url string) (*http.Response, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

func TestEndpoints(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "mcprouter_test_total", Help: "A test counter."})
	reg.MustRegister(c)
	c.Add(7)
	var notReady atomic.Pointer[error]
	s := New(Config{
		Gatherer: reg,
		Ready: func() error {
			if e := notReady.Load(); e != nil {
				return *e
			}
			return nil
		},
		Status: func() func([]byte) []byte {
			return func(dst []byte) []byte { return append(dst, `{"n":1}`...) }
		},
	})
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()

	cases := []struct {
		path, wantType, wantBody string
		status                   int
	}{
		{"/healthz", "text/plain", "ok\n", 200},
		{"/readyz", "text/plain", "ready\n", 200},
		{"/metrics", "text/plain", "mcprouter_test_total 7\n", 200},
		{"/", "text/html", "<title>mcprouter status</title>", 200},
		{"/debug/pprof/", "", "", 404}, // off unless asked for
		{"/nope", "", "", 404},
	}
	for _, c := range cases {
		resp, body := get(t, srv.URL+c.path)
		if resp.StatusCode != c.status || !strings.HasPrefix(resp.Header.Get("Content-Type"), c.wantType) || !strings.Contains(body, c.wantBody) {
			t.Errorf("GET %s: %d %q, want %d %q containing %q:\n%.300s", c.path, resp.StatusCode, resp.Header.Get("Content-Type"), c.status, c.wantType, c.wantBody, body)
		}
	}
	resp, _ := get(t, srv.URL+"/")
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("status page CSP %q", csp)
	}

	e := errors.New("no healthy instance of backend files")
	notReady.Store(&e)
	if resp, body := get(t, srv.URL+"/readyz"); resp.StatusCode != 503 || body != "not ready: no healthy instance of backend files\n" {
		t.Errorf("readyz not ready: %d %q", resp.StatusCode, body)
	}
	notReady.Store(nil)
	s.Shutdown(context.Background()) // not listening: only marks it closing
	if resp, body := get(t, srv.URL+"/readyz"); resp.StatusCode != 503 || !strings.Contains(body, "shutting down") {
		t.Errorf("readyz while shutting down: %d %q", resp.StatusCode, body)
	}
}

func TestPprof(t *testing.T) {
	s := New(Config{Pprof: true})
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	if resp, body := get(t, srv.URL+"/debug/pprof/"); resp.StatusCode != 200 || !strings.Contains(body, "goroutine") {
		t.Errorf("pprof index: %d %.200s", resp.StatusCode, body)
	}
	if resp, _ := get(t, srv.URL+"/debug/pprof/goroutine?debug=1"); resp.StatusCode != 200 {
		t.Errorf("pprof goroutine: %d", resp.StatusCode)
	}
	// No status feed configured: no page.
	if resp, _ := get(t, srv.URL+"/"); resp.StatusCode != 404 {
		t.Errorf("page without a feed: %d", resp.StatusCode)
	}
}

// readEvents reads n SSE data lines from r.
func readEvents(t *testing.T, r *bufio.Reader, n int) []string {
	t.Helper()
	var out []string
	for len(out) < n {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("after %d events: %v", len(out), err)
		}
		if data, ok := strings.CutPrefix(line, "data: "); ok {
			out = append(out, strings.TrimSuffix(data, "\n"))
		}
	}
	return out
}

// event is one SSE event of /events.
type event struct{ id, data string }

// readEvent reads the next event with data from r (the retry line is skipped).
func readEvent(t *testing.T, r *bufio.Reader) event {
	t.Helper()
	var ev event
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("reading events: %v", err)
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case strings.HasPrefix(line, "id: "):
			ev.id = line[len("id: "):]
		case strings.HasPrefix(line, "data: "):
			ev.data = line[len("data: "):]
		case line == "" && ev.data != "":
			return ev
		}
	}
}

// viewer opens /events with the given Last-Event-ID ("" for none).
func viewer(t *testing.T, ctx context.Context, url, lastID string) (*http.Response, *bufio.Reader) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", url+"/events", nil)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != 200 {
		t.Fatalf("GET /events: %d", resp.StatusCode)
	}
	return resp, bufio.NewReader(resp.Body)
}

// expectRun reads n events from r and checks that they are updates first, first+1, ...
// of the one feed (each event's id is its update's number).
func expectRun(t *testing.T, who string, r *bufio.Reader, first, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		ev := readEvent(t, r)
		want := strconv.Itoa(first + i)
		if ev.id != want || ev.data != `{"n":`+want+`}` {
			t.Fatalf("%s: event %d is id %q data %s, want update %s", who, i, ev.id, ev.data, want)
		}
	}
}

// TestEvents: every viewer sees the one feed, sampled once per interval whoever
// watches; a viewer that arrives late gets what came before first, one that
// reconnects gets only what it missed; the viewer limit turns the next one away;
// Shutdown ends the streams.
func TestEvents(t *testing.T) {
	var feeds atomic.Int32
	s := New(Config{
		Interval:   5 * time.Millisecond,
		MaxViewers: 3,
		History:    1 << 16, // nothing falls out during the test: ids are predictable
		Status: func() func([]byte) []byte {
			feeds.Add(1)
			n := 0
			return func(dst []byte) []byte {
				n++
				dst = strconv.AppendInt(append(dst, `{"n":`...), int64(n), 10)
				return append(dst, '}')
			}
		},
	})
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()

	resp, first := viewer(t, ctx, ts.URL, "")
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	expectRun(t, "first viewer", first, 1, 5)

	// A late viewer gets the past at once, from the first update, then the present.
	_, late := viewer(t, ctx, ts.URL, "")
	expectRun(t, "late viewer", late, 1, 8)

	// A viewer that reconnects having seen update 8 resumes at 9.
	_, resumed := viewer(t, ctx, ts.URL, "8")
	expectRun(t, "resumed viewer", resumed, 9, 3)

	// A fourth viewer is over the limit.
	if resp, body := get(t, ts.URL+"/events"); resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" {
		t.Errorf("fourth viewer: %d %q", resp.StatusCode, body)
	}
	if feeds.Load() != 1 {
		t.Errorf("%d feeds made, want 1 shared by every viewer", feeds.Load())
	}

	// Shutdown ends the streams: the readers see the end of the body.
	s.Shutdown(context.Background())
	for _, br := range []*bufio.Reader{first, late, resumed} {
		done := make(chan error, 1)
		go func() { _, err := io.Copy(io.Discard, br); done <- err }()
		select {
		case <-done:
		case <-time.After(waitLimit):
			t.Fatal("events stream still open after Shutdown")
		}
	}
}

// TestEventsUnknownID: a Last-Event-ID this server never handed out (a page left open
// across a restart, or garbage) counts as nothing seen.
func TestEventsUnknownID(t *testing.T) {
	s := New(Config{Interval: time.Hour, Status: func() func([]byte) []byte {
		return func(dst []byte) []byte { return append(dst, `{"n":1}`...) }
	}})
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	defer s.Shutdown(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	for _, id := range []string{"", "99", "x", "-1"} {
		resp, br := viewer(t, ctx, ts.URL, id)
		expectRun(t, "Last-Event-ID "+id, br, 1, 1)
		resp.Body.Close()
	}
}

// TestListenShutdown runs the real listener: Listen, Addr, a scrape, Shutdown.
func TestListenShutdown(t *testing.T) {
	s := New(Config{Addr: "127.0.0.1:0", Status: func() func([]byte) []byte {
		return func(dst []byte) []byte { return append(dst, "{}"...) }
	}})
	if err := s.Listen(); err != nil {
		t.Fatal(err)
	}
	addr := s.Addr()
	if addr == "" || strings.HasSuffix(addr, ":0") {
		t.Fatalf("Addr %q", addr)
	}
	if resp, _ := get(t, "http://"+addr+"/healthz"); resp.StatusCode != 200 {
		t.Errorf("healthz: %d", resp.StatusCode)
	}
	// A viewer attached while shutting down does not hold Shutdown up.
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+addr+"/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	readEvents(t, bufio.NewReader(resp.Body), 1)
	if err := s.Shutdown(ctx); err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	if _, err := http.Get("http://" + addr + "/healthz"); err == nil {
		t.Error("still serving after Shutdown")
	}
}

// TestHostCheck: the admin listener answers only the names it is known by; a foreign
// Host (a DNS rebinding page) gets 421.
func TestHostCheck(t *testing.T) {
	h := New(Config{Addr: "10.1.2.3:8081", AllowedHosts: []string{"Admin.Example"}}).Handler()
	for _, tc := range []struct {
		host string
		want int
	}{
		{"127.0.0.1:8081", http.StatusOK}, {"localhost", http.StatusOK}, {"[::1]:8081", http.StatusOK},
		{"10.1.2.3:8081", http.StatusOK}, {"admin.example:9", http.StatusOK},
		{"evil.example", http.StatusMisdirectedRequest}, {"127.0.0.1.evil.example:8081", http.StatusMisdirectedRequest},
		{"", http.StatusMisdirectedRequest},
	} {
		req := httptest.NewRequest("GET", "/healthz", nil)
		req.Host = tc.host
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != tc.want {
			t.Errorf("Host %q: status %d, want %d", tc.host, rec.Code, tc.want)
		}
	}
	// An unspecified listen address (0.0.0.0) is no name: only loopback and the list.
	h = New(Config{Addr: "0.0.0.0:8081"}).Handler()
	req := httptest.NewRequest("GET", "/healthz", nil)
	req.Host = "0.0.0.0:8081"
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusMisdirectedRequest {
		t.Errorf("Host 0.0.0.0: status %d, want 421", rec.Code)
	}
}
