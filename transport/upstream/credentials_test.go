package upstream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// guard is a backend that requires its own credentials: a request that check refuses
// gets 401 (or refuseStatus), anything else goes to next. It records every request it
// sees, headers and body, so that a test can tell exactly what reached the backend.
type guard struct {
	next  http.Handler
	check func(r *http.Request) (who string, ok bool)
	// refuseStatus is the status of a refusal. Default 401.
	refuseStatus int

	mu   sync.Mutex
	seen []seenRequest
}

type seenRequest struct {
	method string
	header http.Header
	body   string
	who    string // what check said of the credentials ("" when refused)
	ok     bool
}

func (g *guard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(b))
	who, ok := g.check(r)
	g.mu.Lock()
	g.seen = append(g.seen, seenRequest{method: r.Method, header: r.Header.Clone(), body: string(b), who: who, ok: ok})
	g.mu.Unlock()
	if !ok {
		status := g.refuseStatus
		if status == 0 {
			status = http.StatusUnauthorized
		}
		w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
		http.Error(w, "who are you?", status)
		return
	}
	g.next.ServeHTTP(w, r)
}

// requests returns a copy of what the guard saw.
func (g *guard) requests() []seenRequest {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]seenRequest(nil), g.seen...)
}

// count counts the requests with method (any when "") that check accepted (ok) or not.
func (g *guard) count(method string, ok bool) int {
	n := 0
	for _, r := range g.requests() {
		if (method == "" || r.method == method) && r.ok == ok {
			n++
		}
	}
	return n
}

// neverSaw fails the test if any request that reached the guard carried secret, in a
// header or in its body.
func (g *guard) neverSaw(t *testing.T, secret string) {
	t.Helper()
	for _, r := range g.requests() {
		for name, vs := range r.header {
			for _, v := range vs {
				if strings.Contains(v, secret) {
					t.Errorf("%s request carried the secret in header %s", r.method, name)
				}
			}
		}
		if strings.Contains(r.body, secret) {
			t.Errorf("%s request carried the secret in its body", r.method)
		}
	}
}

// headerIs accepts requests whose header name is one of the values in *want.
func headerIs(name string, want *atomic.Pointer[string]) func(r *http.Request) (string, bool) {
	return func(r *http.Request) (string, bool) {
		v := r.Header.Get(name)
		return v, v != "" && v == *want.Load()
	}
}

func ptr(s string) *string { return &s }

// sdkStreamable is the official SDK's Streamable HTTP handler, with SSE replies (and so
// a GET stream).
func sdkStreamable(gen string) http.Handler {
	srv := newSDKServer(gen)
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
}

func sdkLegacy(gen string) http.Handler {
	srv := newSDKServer(gen)
	return mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return srv }, nil)
}

// writeSecret replaces the file at path the way a secret mount rotates: a new file
// renamed over the old one.
func writeSecret(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".new"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// TestCredentialsOnEveryRequest: a static bearer token and an API key read from a file
// travel on every request of an upstream session: initialize, later POSTs, the GET
// stream, and the DELETE that ends it.
func TestCredentialsOnEveryRequest(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "api-key")
	writeSecret(t, keyFile, "key-1\n")
	want := &atomic.Pointer[string]{}
	want.Store(ptr("Bearer static-1"))
	g := &guard{next: sdkStreamable("g"), check: func(r *http.Request) (string, bool) {
		ok := r.Header.Get("Authorization") == *want.Load() && r.Header.Get("X-Api-Key") == "key-1"
		return "router", ok
	}}
	ts := httptest.NewServer(g)
	defer ts.Close()
	bearer, err := Bearer("static-1")
	if err != nil {
		t.Fatal(err)
	}
	key, err := FileHeader("X-Api-Key", keyFile, "")
	if err != nil {
		t.Fatal(err)
	}
	c, s := dialHTTP(t, ts.URL, HTTPOptions{Name: "guarded", Credentials: []Credential{bearer, key}})
	doHandshake(t, c, s)
	if err := c.Send(testCtx(t), []byte(msgList)); err != nil {
		t.Fatal(err)
	}
	mustContain(t, s.waitResponse(t, "2"), `"name":"echo"`)
	c.StartStream()
	s.waitFor(t, "the GET stream", func() bool { return g.count(http.MethodGet, true) > 0 })
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if n := g.count("", false); n != 0 {
		t.Fatalf("%d requests refused", n)
	}
	// Close waits for the DELETE's answer only deleteAnswerWait: on a busy machine the
	// backend may take it later.
	s.waitFor(t, "the DELETE", func() bool { return g.count(http.MethodDelete, true) > 0 })
	if n := g.count(http.MethodDelete, true); n != 1 {
		t.Fatalf("%d DELETEs with credentials, want 1", n)
	}
	if n := g.count(http.MethodPost, true); n < 3 {
		t.Fatalf("%d POSTs with credentials, want 3", n)
	}
	noLeaks(t)
}

// TestBearerFileRotation: the token file is replaced and the backend accepts only the
// new token: the next request is refused once, the file is read again at once, and the
// request succeeds with the new token, on the same upstream session.
func TestBearerFileRotation(t *testing.T) {
	for _, legacy := range []bool{false, true} {
		t.Run(fmt.Sprint("legacy=", legacy), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "token")
			writeSecret(t, path, "one")
			want := &atomic.Pointer[string]{}
			want.Store(ptr("Bearer one"))
			next := sdkStreamable("f")
			if legacy {
				next = sdkLegacy("f")
			}
			g := &guard{next: next, check: headerIs("Authorization", want)}
			ts := httptest.NewServer(g)
			defer ts.Close()
			cred, err := BearerFile(path)
			if err != nil {
				t.Fatal(err)
			}
			opts := HTTPOptions{Name: "rotating", Credentials: []Credential{cred}}
			s := newRecSink()
			var c Conn
			if legacy {
				c, err = DialSSE(testCtx(t), ts.URL, opts, s)
			} else {
				c, err = DialHTTP(testCtx(t), ts.URL, opts, s)
			}
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			doHandshake(t, c, s)

			writeSecret(t, path, "two\n")
			want.Store(ptr("Bearer two"))
			if err := c.Send(testCtx(t), []byte(msgCall(5, "echo", "after rotation"))); err != nil {
				t.Fatalf("send after rotation: %v", err)
			}
			if got := resultText(t, s.waitResponse(t, "5")); got != "f:after rotation" {
				t.Fatalf("result %q", got)
			}
			if n := g.count(http.MethodPost, false); n != 1 {
				t.Fatalf("%d POSTs refused, want 1 (the one that revealed the rotation)", n)
			}
		})
	}
}

// TestBackendRefusalNamesBackend: a backend that refuses the router's credentials gives
// an error that names it and matches ErrUnauthorized, with the status; a static
// credential is not sent again (it cannot change), on every transport path.
func TestBackendRefusalNamesBackend(t *testing.T) {
	for _, status := range []int{http.StatusUnauthorized, http.StatusForbidden} {
		for _, pipeline := range []int{0, 1} {
			t.Run(fmt.Sprintf("%d/pipeline=%d", status, pipeline), func(t *testing.T) {
				g := &guard{next: sdkStreamable("r"), refuseStatus: status,
					check: func(*http.Request) (string, bool) { return "", false }}
				ts := httptest.NewServer(g)
				defer ts.Close()
				bearer, _ := Bearer("not-good-enough")
				c, _ := dialHTTP(t, ts.URL, HTTPOptions{Name: "crm", Pipeline: pipeline, Credentials: []Credential{bearer}})
				defer c.Close()
				err := c.Send(testCtx(t), []byte(msgInit))
				if !errors.Is(err, ErrUnauthorized) || errors.Is(err, ErrBackendDown) {
					t.Fatalf("err %v, want ErrUnauthorized", err)
				}
				var se *StatusError
				if !errors.As(err, &se) || se.Status != status || se.Backend != "crm" {
					t.Fatalf("err %#v", err)
				}
				if msg := err.Error(); !strings.Contains(msg, "backend crm refused the router's credentials") {
					t.Fatalf("message %q does not say who refused what", msg)
				}
				if n := len(g.requests()); n != 1 {
					t.Fatalf("backend saw %d requests, want 1: a static credential is not retried", n)
				}
			})
		}
	}
	t.Run("legacy", func(t *testing.T) {
		g := &guard{next: sdkLegacy("r"), check: func(*http.Request) (string, bool) { return "", false }}
		ts := httptest.NewServer(g)
		defer ts.Close()
		bearer, _ := Bearer("nope")
		_, err := DialSSE(testCtx(t), ts.URL, HTTPOptions{Name: "old", Credentials: []Credential{bearer}}, newRecSink())
		if !errors.Is(err, ErrUnauthorized) || !strings.Contains(err.Error(), "backend old refused") {
			t.Fatalf("err %v, want ErrUnauthorized naming the backend", err)
		}
		noLeaks(t)
	})
}

// TestGetStreamKeepsTryingAfterRefusal: the GET stream refused for the router's
// credentials is not given up (as other 4xx are): it reopens with the new token once the
// secret is rotated.
func TestGetStreamKeepsTryingAfterRefusal(t *testing.T) {
	path := filepath.Join(t.TempDir(), "token")
	writeSecret(t, path, "one")
	want := &atomic.Pointer[string]{}
	want.Store(ptr("Bearer one"))
	var refuseGets atomic.Bool
	g := &guard{next: sdkStreamable("s"), check: func(r *http.Request) (string, bool) {
		if r.Method == http.MethodGet && refuseGets.Load() {
			return "", false
		}
		return headerIs("Authorization", want)(r)
	}}
	ts := httptest.NewServer(g)
	defer ts.Close()
	cred, err := BearerFile(path)
	if err != nil {
		t.Fatal(err)
	}
	c, s := dialHTTP(t, ts.URL, HTTPOptions{Credentials: []Credential{cred}, ReconnectMin: 5 * time.Millisecond, ReconnectMax: 20 * time.Millisecond})
	defer c.Close()
	doHandshake(t, c, s)
	refuseGets.Store(true)
	c.StartStream()
	s.waitFor(t, "refused GETs", func() bool { return g.count(http.MethodGet, false) >= 2 })
	refuseGets.Store(false)
	s.waitFor(t, "an accepted GET", func() bool { return g.count(http.MethodGet, true) > 0 })
}

// TestCredentialValidation: credentials on headers the transport owns, twice the same
// header, and unusable secrets are refused before anything is sent.
func TestCredentialValidation(t *testing.T) {
	if _, err := StaticHeader("Mcp-Session-Id", "x"); err == nil {
		t.Error("a credential in Mcp-Session-Id was accepted")
	}
	if _, err := StaticHeader("Bad Header", "x"); err == nil {
		t.Error("a header name with a space was accepted")
	}
	if _, err := StaticHeader("X-Key", "a\r\nX-Injected: 1"); err == nil || strings.Contains(err.Error(), "Injected") {
		t.Errorf("a value with a line break: %v (the error must not quote the secret)", err)
	}
	if _, err := Bearer(""); err == nil {
		t.Error("an empty token was accepted")
	}
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	writeSecret(t, empty, "\n")
	if _, err := BearerFile(empty); err == nil {
		t.Error("an empty token file was accepted")
	}
	if _, err := BearerFile(filepath.Join(dir, "missing")); err == nil {
		t.Error("a missing token file was accepted")
	}
	twoLines := filepath.Join(dir, "two-lines")
	writeSecret(t, twoLines, "tok\nen\n")
	if _, err := BearerFile(twoLines); err == nil {
		t.Error("a token file with a line break inside was accepted")
	}
	bearer, _ := Bearer("t")
	if _, err := DialHTTP(context.Background(), "http://127.0.0.1:1/mcp",
		HTTPOptions{Headers: map[string]string{"authorization": "Bearer x"}, Credentials: []Credential{bearer}}, newRecSink()); err == nil {
		t.Error("Authorization both in Headers and Credentials was accepted")
	}
}

// TestCredentialNeverPrinted: printing or logging a credential shows its header, never
// its value.
func TestCredentialNeverPrinted(t *testing.T) {
	path := filepath.Join(t.TempDir(), "token")
	writeSecret(t, path, "file-secret")
	fc, err := BearerFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sc, _ := StaticHeader("X-Api-Key", "static-secret")
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	for _, c := range []Credential{fc, sc} {
		log.Info("cred", "c", c)
		fmt.Fprintf(&buf, "%v %+v %#v %s\n", c, c, c, c)
	}
	if out := buf.String(); strings.Contains(out, "secret") {
		t.Fatalf("a secret was printed: %s", out)
	}
}
