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

// TestEvents: a viewer gets an update at once and then one per interval, each from its
// own feed; the viewer limit turns the next one away; Shutdown ends the streams.
func TestEvents(t *testing.T) {
	var feeds atomic.Int32
	s := New(Config{
		Interval:   5 * time.Millisecond,
		MaxViewers: 1,
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
	req, _ := http.NewRequestWithContext(ctx, "GET", ts.URL+"/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	br := bufio.NewReader(resp.Body)
	got := readEvents(t, br, 3)
	for i, ev := range got {
		if want := `{"n":` + strconv.Itoa(i+1) + `}`; ev != want {
			t.Errorf("event %d: %s, want %s", i, ev, want)
		}
	}

	// A second viewer is over the limit.
	if resp2, body := get(t, ts.URL+"/events"); resp2.StatusCode != 503 || resp2.Header.Get("Retry-After") == "" {
		t.Errorf("second viewer: %d %q", resp2.StatusCode, body)
	}
	if feeds.Load() != 1 {
		t.Errorf("%d feeds made, want 1", feeds.Load())
	}

	// Shutdown ends the stream: the reader sees the end of the body.
	s.Shutdown(context.Background())
	done := make(chan error, 1)
	go func() { _, err := io.Copy(io.Discard, br); done <- err }()
	select {
	case <-done:
	case <-time.After(waitLimit):
		t.Fatal("events stream still open after Shutdown")
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
