package testio

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// TestTap: a request through the proxy reaches the server with its path, headers and
// body, see is handed the body first, and the reply comes back as the server wrote it.
func TestTap(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Path", r.URL.Path)
		w.WriteHeader(http.StatusAccepted)
		w.Write([]byte(r.Header.Get("X-Test") + ":" + string(body)))
	}))
	t.Cleanup(srv.Close)
	var mu sync.Mutex
	var seen []string
	url := Tap(t, srv.URL+"/mcp", func(r *http.Request, body []byte) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, r.Method+" "+string(body))
	})
	if !strings.HasSuffix(url, "/mcp") || strings.HasPrefix(url, srv.URL) {
		t.Fatalf("proxy URL %s: want another server's, with the path /mcp", url)
	}
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader("hello"))
	req.Header.Set("X-Test", "h")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted || string(got) != "h:hello" || resp.Header.Get("X-Path") != "/mcp" {
		t.Errorf("reply %d %q (path %q), want 202 h:hello from /mcp", resp.StatusCode, got, resp.Header.Get("X-Path"))
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 1 || seen[0] != "POST hello" {
		t.Errorf("see was handed %q, want [POST hello]", seen)
	}
}
