package server_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/cmd/mcpbackend/mcpbackendtest"
	"github.com/mcprouter/mcprouter/cmd/mcpbackend/server"
	"github.com/mcprouter/mcprouter/internal/testwait"
)

// TestInitializedSessionOutlivesInitTimeout: a session whose client finished the
// handshake (notifications/initialized) is not ended by the transport's handshake
// timeout; one that never finished it is. Every long-lived session to a reference
// backend (a router's, for one) depends on the first.
func TestInitializedSessionOutlivesInitTimeout(t *testing.T) {
	s := mcpbackendtest.Start(t, server.Config{Tick: -1, InitTimeout: 200 * time.Millisecond})
	post := func(sid, body string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, s.URL(), strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
			req.Header.Set("MCP-Protocol-Version", "2025-11-25")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp, resp.Header.Get("Mcp-Session-Id")
	}
	const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	_, done := post("", initialize)
	post(done, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	_, unfinished := post("", initialize)
	if done == "" || unfinished == "" {
		t.Fatal("initialize gave no session id")
	}
	ping := `{"jsonrpc":"2.0","id":2,"method":"ping"}`
	testwait.For(t, "the unfinished handshake's session to end", 20*time.Second, func() bool {
		resp, _ := post(unfinished, ping)
		return resp.StatusCode == http.StatusNotFound
	})
	if resp, _ := post(done, ping); resp.StatusCode != http.StatusOK {
		t.Fatalf("the initialized session answered %d after the handshake timeout, want 200", resp.StatusCode)
	}
}
