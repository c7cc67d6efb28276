package server_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/cmd/mcpbackend/mcpbackendtest"
	"github.com/mcprouter/mcprouter/cmd/mcpbackend/server"
	"github.com/mcprouter/mcprouter/internal/mcpraw"
	"github.com/mcprouter/mcprouter/internal/testwait"
)

// TestInitializedSessionOutlivesInitTimeout: a session whose client finished the
// handshake (notifications/initialized) is not ended by the transport's handshake
// timeout; one that never finished it is. Every long-lived session to a reference
// backend (a router's, for one) depends on the first.
func TestInitializedSessionOutlivesInitTimeout(t *testing.T) {
	s := mcpbackendtest.Start(t, server.Config{Tick: -1, InitTimeout: 200 * time.Millisecond})
	ctx := context.Background()
	done, unfinished := &mcpraw.Client{URL: s.URL()}, &mcpraw.Client{URL: s.URL()}
	if _, err := done.Initialize(ctx, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := unfinished.Post(ctx, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`); err != nil {
		t.Fatal(err)
	}
	if done.Session == "" || unfinished.Session == "" {
		t.Fatal("initialize gave no session id")
	}
	ping := func(c *mcpraw.Client) int {
		t.Helper()
		r, err := c.Post(ctx, `{"jsonrpc":"2.0","id":2,"method":"ping"}`)
		if err != nil {
			t.Fatal(err)
		}
		return r.Status
	}
	testwait.For(t, "the unfinished handshake's session to end", 20*time.Second, func() bool {
		return ping(unfinished) == http.StatusNotFound
	})
	if status := ping(done); status != http.StatusOK {
		t.Fatalf("the initialized session answered %d after the handshake timeout, want 200", status)
	}
}
