package testio

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"testing"
)

// Tap starts a loopback reverse proxy to the HTTP server of target (a URL) that hands
// each request's body to see, then passes the request on as it came; replies and event
// streams pass back as they come. It returns the proxy's URL with target's path, for a
// router to take as a backend's; the proxy closes when the test ends. see runs on the
// proxy's serving goroutines, several at once.
func Tap(tb testing.TB, target string, see func(r *http.Request, body []byte)) string {
	tb.Helper()
	u, err := url.Parse(target)
	if err != nil {
		tb.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: u.Scheme, Host: u.Host})
	proxy.FlushInterval = -1 // SSE replies and the GET stream pass through as they come
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		see(r, body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		proxy.ServeHTTP(w, r)
	}))
	tb.Cleanup(srv.Close)
	return srv.URL + u.Path
}
