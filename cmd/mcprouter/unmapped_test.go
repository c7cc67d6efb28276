package main

// What the router answers a request it cannot map to the backend's era, through the
// router binary: -32601 with the translation table's reason (router/modern.Mappings),
// never a bare "Method not found".

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/mcprouter/mcprouter/internal/mcpraw"
	"github.com/mcprouter/mcprouter/internal/testbin"
)

// TestUnmappedMethods: a 2025 client's tasks/list and tasks/result in front of a
// 2026-07-28 backend are told they were removed in 2026-07-28 (and that the router
// routes no tasks requests); a 2026-07-28 client's tasks/update in front of a 2025
// backend is told 2025 has no such request, with HTTP 404.
func TestUnmappedMethods(t *testing.T) {
	testbin.Long(t, "starts processes")
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()

	t.Run("2025 client, 2026-07-28 backend", func(t *testing.T) {
		p := startRouterFor(t, startEraBackend(t, "modern"))
		c := &mcpraw.Client{URL: p.url("/mcp")}
		if r, err := c.Initialize(ctx, `{"extensions":{"io.modelcontextprotocol/tasks":{}}}`); err != nil || r.Status != 200 {
			t.Fatalf("initialize: %v %s", err, r)
		}
		for _, method := range []string{"tasks/list", "tasks/result"} {
			r, err := c.Post(ctx, `{"jsonrpc":"2.0","id":2,"method":"`+method+`","params":{"taskId":"t1"}}`)
			if err != nil {
				t.Fatal(err)
			}
			msgs := r.Messages()
			var a mcpraw.Answer
			if len(msgs) != 1 || json.Unmarshal(msgs[0], &a) != nil || a.Error == nil || a.Error.Code != -32601 ||
				!strings.Contains(a.Error.Message, "removed in 2026-07-28") || !strings.Contains(a.Error.Message, "does not route the tasks extension") {
				t.Fatalf("%s: %s, want -32601 saying it was removed in 2026-07-28", method, r)
			}
		}
	})

	t.Run("2026-07-28 client, 2025 backend", func(t *testing.T) {
		p := startRouterFor(t, startEraBackend(t, "legacy"))
		body := `{"jsonrpc":"2.0","id":3,"method":"tasks/update","params":{"taskId":"t1",` +
			`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}}}`
		resp := postModernAs(t, p, "", body, "tasks/update", "")
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var a mcpraw.Answer
		if resp.StatusCode != 404 || json.Unmarshal(raw, &a) != nil || a.Error == nil || a.Error.Code != -32601 ||
			!strings.Contains(a.Error.Message, "2025 tasks take no input") {
			t.Fatalf("tasks/update: %d %s, want 404 and -32601 saying 2025 has no such request", resp.StatusCode, raw)
		}
	})
}
