package fleet

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcprouter/mcprouter/internal/testbin"
	"github.com/mcprouter/mcprouter/loadgen/sdktest"
)

// TestURLElicitationForLegacyClient: a 2026-07-28 backend's input_required holding a
// URL-mode elicitation reaches a 2025-11-25 client (the Go SDK's, pinned) as an
// elicitation/create in URL mode on its session, with the backend's URL and message
// and an elicitationId (2025-11-25 requires one, 2026-07-28 has none);
// the client's answer goes back in the retry and the call completes. A client that
// declared elicitation in form mode alone gets an error naming elicitation.url.
func TestURLElicitationForLegacyClient(t *testing.T) {
	testbin.Long(t, "starts mcprouter")
	srv := mcp.NewServer(&mcp.Implementation{Name: "shop", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "pay"}, func(_ context.Context, req *mcp.CallToolRequest, _ any) (*mcp.CallToolResult, any, error) {
		if r, ok := req.Params.InputResponses["pay"].(*mcp.ElicitResult); ok {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "user: " + r.Action}}}, nil, nil
		}
		return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{
			"pay": &mcp.ElicitParams{Mode: "url", Message: "Pay at the shop", URL: "https://shop.example/pay?o=2"},
		}}, nil, nil
	})
	hs := sdktest.StartHTTP(srv, sdktest.Stateless)
	t.Cleanup(hs.Close)
	endpoint, _ := startRouter(t, hs.URL+"/mcp", "2026")

	connect := func(modes *mcp.ElicitationCapabilities, asked chan<- *mcp.ElicitParams) *mcp.ClientSession {
		return connectPinned(t, mcp.NewClient(&mcp.Implementation{Name: "e2e-2025", Version: "1"}, &mcp.ClientOptions{
			Capabilities: &mcp.ClientCapabilities{Elicitation: modes},
			ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				asked <- req.Params
				return &mcp.ElicitResult{Action: "accept"}, nil
			},
		}), endpoint)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	asked := make(chan *mcp.ElicitParams, 1)
	cs := connect(&mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}, URL: &mcp.URLElicitationCapabilities{}}, asked)
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "pay"})
	if err != nil {
		t.Fatal(err)
	}
	if got := textOf(t, res); got != "user: accept" {
		t.Fatalf("%q, want the backend's result made with the client's answer", got)
	}
	p := within(t, asked, time.Second, "the elicitation")
	if p.Mode != "url" || p.URL != "https://shop.example/pay?o=2" || p.Message != "Pay at the shop" || p.ElicitationID == "" {
		t.Fatalf("elicitation %+v, want the backend's URL-mode elicitation, with the elicitationId 2025-11-25 requires", p)
	}

	formOnly := connect(&mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}}, make(chan *mcp.ElicitParams, 1))
	if _, err := formOnly.CallTool(ctx, &mcp.CallToolParams{Name: "pay"}); err == nil || !strings.Contains(err.Error(), "elicitation.url") {
		t.Fatalf("form-only client: %v, want an error naming elicitation.url", err)
	}
}

// TestWithElicitationID: the id goes first, before the members there are.
func TestWithElicitationID(t *testing.T) {
	for in, want := range map[string]string{
		`{"mode":"url","url":"u"}`: `{"elicitationId":"mcprouter-3","mode":"url","url":"u"}`,
		`{ }`:                      `{"elicitationId":"mcprouter-3" }`,
	} {
		if got := string(withElicitationID([]byte(in), 3)); got != want {
			t.Errorf("%s: %s, want %s", in, got, want)
		}
	}
}
