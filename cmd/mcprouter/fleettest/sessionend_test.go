package fleettest

import (
	"context"
	"net/http"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcprouter/mcprouter/internal/mcpraw"
	"github.com/mcprouter/mcprouter/internal/testwait"
)

// TestSessionEndCancelsCalls ends a Go SDK client's session while a long call of it
// runs on each backend kind: by a DELETE of the Streamable HTTP session (the SDK's own
// Close waits for the call to end first), or, over legacy HTTP+SSE, by the end of the
// client's stream, which is that session's life. The router cancels the call upstream at
// once instead of leaving the backend to finish work whose answer nobody can take, and
// forgets it; the HTTP backends' own counters, read directly, show the cancellation
// arrived.
func TestSessionEndCancelsCalls(t *testing.T) {
	f := startFleet(t)
	d := newDirectStats(t, f)

	for _, sse := range []bool{false, true} {
		for _, b := range backendNames {
			name := b
			if sse {
				name = "sse-client/" + b
			}
			t.Run(name, func(t *testing.T) {
				w := d.watchCancel(f, b)
				c := connectSDK(t, f, clientOptions{sse: sse})
				done := make(chan error, 1)
				go func() {
					_, err := c.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: b + "__sleep", Arguments: map[string]any{"ms": 50000}})
					done <- err
				}()
				w.running(t)
				if sse {
					c.drop()
				} else {
					endSession(t, f, c.cs.ID())
				}
				if err := testwait.Recv(t, "the call to end with its session", wait, done); err == nil {
					t.Error("the call returned a result after its session ended")
				}
				w.cancelled(t)
			})
		}
	}
}

// endSession deletes Streamable HTTP session sid at the router, as a client ending it
// does; the router answers 200 for a session it knew.
func endSession(t *testing.T, f *fleet, sid string) {
	t.Helper()
	c := &mcpraw.Client{URL: f.mcpURL(), Session: sid}
	resp, err := c.Do(c.NewRequest(context.Background(), http.MethodDelete, ""))
	if err != nil {
		t.Fatalf("DELETE session: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("DELETE session: status %d, want 200", resp.StatusCode)
	}
}
