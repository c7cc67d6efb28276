package fleettest

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"testing"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// expectedTools is every tool name the router must expose: each backend's built-in
// tools under its prefix, and big's generated ones.
func expectedTools() []string {
	var out []string
	for _, b := range backendNames {
		for _, tool := range builtinTools {
			out = append(out, b+"__"+tool)
		}
	}
	for i := 1; i <= bigExtraTools; i++ {
		out = append(out, fmt.Sprintf("%s__tool_%04d", bigName, i))
	}
	sort.Strings(out)
	return out
}

func expectedPrompts() []string {
	var out []string
	for _, b := range backendNames {
		out = append(out, b+"__greet", b+"__summarize")
	}
	sort.Strings(out)
	return out
}

// expectedResources: URIs served by several backends appear once (the first configured
// backend keeps them), so the list is the union of URIs.
func expectedResources() []string {
	out := []string{"counter://tick", "memo://board", "stats://server"}
	for i := 1; i <= pairItems; i++ {
		out = append(out, fmt.Sprintf("item://%04d", i))
	}
	sort.Strings(out)
	return out
}

// expectedTemplates: every backend serves the same two templates; like resources and
// names, a template served by several backends is listed once.
func expectedTemplates() []string { return []string{"bytes://{n}", "echo://{text}"} }

// namesOf is what checkList compares: the name (or URI) of each listed item.
func namesOf[T any](items []T, name func(T) string) []string {
	names := make([]string, 0, len(items))
	for _, x := range items {
		names = append(names, name(x))
	}
	return names
}

// checkList compares a listing with what is expected, naming duplicates, missing and
// unexpected items (a few of each).
func checkList(t *testing.T, what string, got, want []string) {
	t.Helper()
	seen := map[string]int{}
	for _, g := range got {
		seen[g]++
	}
	var dup, extra, missing []string
	for k, n := range seen {
		if n > 1 {
			dup = append(dup, fmt.Sprintf("%s x%d", k, n))
		}
		if !slices.Contains(want, k) {
			extra = append(extra, k)
		}
	}
	for _, w := range want {
		if seen[w] == 0 {
			missing = append(missing, w)
		}
	}
	sort.Strings(dup)
	sort.Strings(extra)
	clip := func(s []string) []string { return s[:min(len(s), 10)] }
	if len(dup)+len(extra)+len(missing) > 0 {
		t.Errorf("%s: %d items, want %d; duplicated %d %v, unexpected %d %v, missing %d %v",
			what, len(got), len(want), len(dup), clip(dup), len(extra), clip(extra), len(missing), clip(missing))
	}
}

// TestListingReachesEveryItem lists the merged catalog page by page with both clients:
// every tool of every backend (266, over several pages of the router's own paging,
// built from five pages of big's) appears exactly once, and so do prompts, resources
// and resource templates.
func TestListingReachesEveryItem(t *testing.T) {
	f := startFleet(t)
	wantTools := expectedTools()

	t.Run("go-sdk", func(t *testing.T) {
		for _, o := range []clientOptions{{}, {sse: true, version: "2024-11-05"}} {
			c := connectSDK(t, f, o)
			ctx, cancel := context.WithTimeout(context.Background(), wait)
			defer cancel()
			var names []string
			pages := 0
			cursor := ""
			for pages < 100 { // bounded: the router's pages must end
				res, err := c.cs.ListTools(ctx, &mcp.ListToolsParams{Cursor: cursor})
				if err != nil {
					t.Fatalf("tools/list page %d (sse=%v): %v", pages, o.sse, err)
				}
				pages++
				for _, tool := range res.Tools {
					names = append(names, tool.Name)
				}
				if cursor = res.NextCursor; cursor == "" {
					break
				}
			}
			if pages < 2 {
				t.Errorf("tools/list: %d page(s) for %d tools; the router's paging was not exercised", pages, len(names))
			}
			checkList(t, "tools", names, wantTools)

			var prompts, resources, templates []string
			for p, err := range c.cs.Prompts(ctx, nil) {
				if err != nil {
					t.Fatalf("prompts/list: %v", err)
				}
				prompts = append(prompts, p.Name)
			}
			for r, err := range c.cs.Resources(ctx, nil) {
				if err != nil {
					t.Fatalf("resources/list: %v", err)
				}
				resources = append(resources, r.URI)
			}
			for r, err := range c.cs.ResourceTemplates(ctx, nil) {
				if err != nil {
					t.Fatalf("resources/templates/list: %v", err)
				}
				templates = append(templates, r.URITemplate)
			}
			checkList(t, "prompts", prompts, expectedPrompts())
			checkList(t, "resources", resources, expectedResources())
			checkList(t, "resource templates", templates, expectedTemplates())
		}
	})

	t.Run("mcp-go", func(t *testing.T) {
		c := connectMCPGo(t, f, clientOptions{})
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		var names []string
		pages := 0
		req := mcpgo.ListToolsRequest{}
		for pages < 100 {
			res, err := c.c.ListToolsByPage(ctx, req)
			if err != nil {
				t.Fatalf("tools/list page %d: %v", pages, err)
			}
			pages++
			names = append(names, namesOf(res.Tools, func(x mcpgo.Tool) string { return x.Name })...)
			if res.NextCursor == "" {
				break
			}
			req.Params.Cursor = res.NextCursor
		}
		if pages < 2 {
			t.Errorf("tools/list: %d page(s) for %d tools; the router's paging was not exercised", pages, len(names))
		}
		checkList(t, "tools", names, wantTools)

		// The client's own pager agrees.
		all, err := c.c.ListTools(ctx, mcpgo.ListToolsRequest{})
		if err != nil {
			t.Fatalf("ListTools: %v", err)
		}
		checkList(t, "tools (mcp-go pager)", namesOf(all.Tools, func(x mcpgo.Tool) string { return x.Name }), wantTools)

		prompts, err := c.c.ListPrompts(ctx, mcpgo.ListPromptsRequest{})
		if err != nil {
			t.Fatalf("ListPrompts: %v", err)
		}
		checkList(t, "prompts", namesOf(prompts.Prompts, func(x mcpgo.Prompt) string { return x.Name }), expectedPrompts())
		resources, err := c.c.ListResources(ctx, mcpgo.ListResourcesRequest{})
		if err != nil {
			t.Fatalf("ListResources: %v", err)
		}
		checkList(t, "resources", namesOf(resources.Resources, func(x mcpgo.Resource) string { return x.URI }), expectedResources())
	})
}
