package fleet

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/valyala/fasthttp"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/loadgen/sdktest"
	"github.com/mcprouter/mcprouter/router"
	"github.com/mcprouter/mcprouter/router/modern"
	"github.com/mcprouter/mcprouter/transport"
	"github.com/mcprouter/mcprouter/transport/auth"
)

// urlBackend serves, on loopback, the 2025 tool "pay": it answers URL elicitation
// required (-32042, as the Go SDK's URLElicitationRequiredError writes it) until the
// out-of-band flow is through (paid set, as the test's stand-in for the user's browser),
// then "paid"; calls counts its calls.
func urlBackend(t *testing.T, paid *atomic.Bool, calls *atomic.Int64) string {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "shop", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "pay"}, func(context.Context, *mcp.CallToolRequest, map[string]any) (*mcp.CallToolResult, any, error) {
		calls.Add(1)
		if !paid.Load() {
			return nil, nil, mcp.URLElicitationRequiredError([]*mcp.ElicitParams{{Mode: "url", Message: "Pay at the shop",
				URL: "https://shop.example/pay?o=1", ElicitationID: "e-1"}})
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "paid"}}}, nil, nil
	})
	// done tells the client, on the request's stream, that elicitation e-1 completed,
	// reports progress, and answers.
	mcp.AddTool(srv, &mcp.Tool{Name: "done"}, func(ctx context.Context, req *mcp.CallToolRequest, _ any) (*mcp.CallToolResult, any, error) {
		if err := req.Session.NotifyElicitationComplete(ctx, &mcp.ElicitationCompleteParams{ElicitationID: "e-1"}); err != nil {
			return nil, nil, err
		}
		if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(), Progress: 1}); err != nil {
			return nil, nil, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil, nil
	})
	return sdktest.Serve(t, srv)
}

// urlFront serves n's router to stateless clients over HTTP on loopback, as mcprouter
// does (the reply goes through the router's screen, which reshapes errors), and
// returns its address.
func urlFront(t *testing.T, n *ownerNode) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	serveHTTPFront(t, ln, n.r, 0)
	return ln.Addr().String()
}

// serveHTTPFront serves r on ln as mcprouter's MCP listener does (the Streamable HTTP
// rules, the router's statuses; streamAfter is HTTPConfig.StatelessStreamAfter, 0 its
// default) until the test ends.
func serveHTTPFront(t *testing.T, ln net.Listener, r *router.Router, streamAfter time.Duration) {
	reg := transport.NewRegistry(transport.RegistryConfig{}, r)
	hs := transport.NewHTTPServer(transport.HTTPConfig{
		Rules:                transport.DefaultHTTPRules(ln.Addr().String(), router.HeaderVersions, router.V20250326),
		ReplyTimeout:         time.Minute,
		StatelessStreamAfter: streamAfter,
		StatusOf:             router.StatusOf,
	}, reg, r)
	fs := &fasthttp.Server{Handler: hs.ServeStreamable, NoDefaultContentType: true}
	go fs.Serve(ln)
	t.Cleanup(func() {
		fs.Shutdown()
		hs.Shutdown()
		reg.Close()
	})
}

// callURL posts a 2026-07-28 tools/call of pay with amount to the front at addr, with
// capabilities caps and the further params members extra, and returns its answer and
// HTTP status.
func callURL(t *testing.T, addr, amount, caps, extra string) (ownerAnswer, int) {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"pay","arguments":{"amount":` + amount + `},` +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":` + caps + `}` + extra + `}}`
	raw, sse, status := postStateless(t, addr, "pay", body)
	if sse {
		// The reply is the stream's last event.
		i := bytes.LastIndex(raw, []byte("data: "))
		if i < 0 {
			t.Fatalf("stream %s: no event", raw)
		}
		raw, _, _ = bytes.Cut(raw[i+len("data: "):], []byte("\n"))
	}
	var a ownerAnswer
	if err := json.Unmarshal(raw, &a); err != nil {
		t.Fatalf("answer %s: %v", raw, err)
	}
	return a, status
}

// postStateless posts the 2026-07-28 tools/call body of tool to the front at addr and
// returns the reply's body, whether it is an event stream, and its status.
func postStateless(t *testing.T, addr, tool, body string) (raw []byte, sse bool, status int) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", tool)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ = io.ReadAll(resp.Body)
	return raw, strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream"), resp.StatusCode
}

// TestURLElicitationForModernClient: a 2025 backend's -32042 reaches a 2026-07-28
// client as the revision has it, an input_required result holding URL-mode
// elicitation/create requests; the client's retry (accepted) sends the original request
// to the backend again, and gets its answer: another input_required while the user's
// flow is not through, the result once it is. A declined elicitation, a missing answer,
// a client without URL-mode elicitation, and a state replayed for other arguments or by
// another principal get clear errors, and no backend call.
func TestURLElicitationForModernClient(t *testing.T) {
	var paid atomic.Bool
	var calls atomic.Int64
	n := startNode(t, urlBackend(t, &paid, &calls), nil, nil, false)
	const caps = `{"elicitation":{"url":{}}}`
	addr := urlFront(t, n)

	askedURL := func(a ownerAnswer, status int) (key, state string) {
		t.Helper()
		if status != http.StatusOK || a.Error != nil || a.Result.ResultType != "input_required" || len(a.Result.InputRequests) != 1 {
			t.Fatalf("answer %+v %+v, want input_required with one URL elicitation", a, a.Error)
		}
		for k, req := range a.Result.InputRequests {
			var r struct {
				Method string
				Params map[string]any
			}
			if err := json.Unmarshal(req, &r); err != nil {
				t.Fatal(err)
			}
			want := map[string]any{"mode": "url", "message": "Pay at the shop", "url": "https://shop.example/pay?o=1"}
			if r.Method != "elicitation/create" || len(r.Params) != len(want) {
				t.Fatalf("input request %s, want elicitation/create with %v", req, want)
			}
			for name, v := range want {
				if r.Params[name] != v {
					t.Fatalf("input request %s: %s %v, want %v", req, name, r.Params[name], v)
				}
			}
			key = k
		}
		if !strings.HasPrefix(a.Result.RequestState, statePrefix) {
			t.Fatalf("requestState %q, want one of the router's", a.Result.RequestState)
		}
		return key, a.Result.RequestState
	}
	retry := func(key, action, state string) string {
		return `,"inputResponses":{"` + key + `":{"action":"` + action + `"}},"requestState":"` + state + `"`
	}

	key, state := askedURL(callURL(t, addr, "3", caps, ""))
	// Accepted before the flow is through: the backend is asked again, and asks again.
	key, state = askedURL(callURL(t, addr, "3", caps, retry(key, "accept", state)))
	if got := calls.Load(); got != 2 {
		t.Fatalf("backend calls %d, want 2 (the retry sends the request again)", got)
	}
	paid.Store(true)
	// A state is bound to the request's arguments (and principal: TestOpenState).
	if a, _ := callURL(t, addr, "4", caps, retry(key, "accept", state)); a.Error == nil || a.Error.Code != -32602 {
		t.Fatalf("retry for other arguments: %+v, want invalid params", a)
	}
	if a, _ := callURL(t, addr, "3", caps, `,"inputResponses":{},"requestState":"`+state+`"`); a.Error == nil ||
		a.Error.Code != -32602 || !strings.Contains(a.Error.Message, key) {
		t.Fatalf("retry without the answer: %+v, want invalid params naming %s", a, key)
	}
	for _, action := range []string{"decline", "cancel"} {
		if a, _ := callURL(t, addr, "3", caps, retry(key, action, state)); a.Error == nil || !strings.Contains(a.Error.Message, "did not accept the URL elicitation") {
			t.Fatalf("retry %s: %+v, want an error saying the user did not accept", action, a)
		}
	}
	if got := calls.Load(); got != 2 {
		t.Fatalf("backend calls %d after refused retries, want still 2", got)
	}
	a, status := callURL(t, addr, "3", caps, retry(key, "accept", state))
	if status != http.StatusOK || a.Error != nil || a.Result.ResultType != "complete" || len(a.Result.Content) != 1 || a.Result.Content[0].Text != "paid" {
		t.Fatalf("accepted retry once paid: %+v, want the tool's result", a)
	}

	// Without URL-mode elicitation the client cannot be asked: -32021 naming it.
	paid.Store(false)
	a, status = callURL(t, addr, "3", `{"elicitation":{}}`, "")
	if status != http.StatusBadRequest || a.Error == nil || a.Error.Code != -32021 || !strings.Contains(a.Error.Message, "elicitation.url") {
		t.Fatalf("client without elicitation.url: %+v, want -32021 naming elicitation.url", a)
	}
}

// TestURLInputRequests: the elicitations of a -32042's data that become input
// requests, and those that cannot.
func TestURLInputRequests(t *testing.T) {
	for _, tc := range []struct{ els, want string }{
		{`[{"mode":"url","url":"https://a","message":"m","elicitationId":"1"}]`, `{"mode":"url","message":"m","url":"https://a"}`},
		{`[{"url":"https://a"}]`, `{"mode":"url","message":"The server needs you to open a URL to continue.","url":"https://a"}`},
		{`[{"mode":"form","url":"https://a","message":"m"}]`, ``},
		{`[{"mode":"url","message":"m"}]`, ``},
		{`{"url":"https://a"}`, ``},
		{``, ``},
	} {
		reqs := urlInputRequests([]byte(tc.els))
		var got string
		if len(reqs) == 1 {
			got = string(reqs[0].Params)
		} else if len(reqs) > 1 {
			t.Fatalf("%s: %d requests", tc.els, len(reqs))
		}
		if got != tc.want {
			t.Errorf("%s: %s, want %s", tc.els, got, tc.want)
		}
	}
}

// TestElicitationCompleteDropped: a 2025 backend's notifications/elicitation/complete on
// a 2026-07-28 client's request stream is dropped (2026-07-28 has no such notification:
// modern.Mappings), while its progress on the same stream reaches the client.
func TestElicitationCompleteDropped(t *testing.T) {
	var paid atomic.Bool
	var calls atomic.Int64
	addr := urlFront(t, startNode(t, urlBackend(t, &paid, &calls), nil, nil, false))
	body := `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"done","arguments":{},` +
		`"_meta":{"progressToken":"p","io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{"url":{}}}}}}`
	raw, sse, status := postStateless(t, addr, "done", body)
	if status != http.StatusOK || !sse || !bytes.Contains(raw, []byte(`"notifications/progress"`)) || !bytes.Contains(raw, []byte(`"text":"done"`)) {
		t.Fatalf("reply (%d, event stream %v): %s, want the progress, then the result", status, sse, raw)
	}
	if bytes.Contains(raw, []byte("elicitation/complete")) {
		t.Fatalf("reply %s: notifications/elicitation/complete reached a 2026-07-28 client", raw)
	}
}

// TestOpenURLState: a URL state names no call, so an instance sharing the sealing key
// opens it as its own (its retry is routed there, not sent to the instance that sealed
// it); it is still refused for another principal, after its TTL, and by an instance
// that cannot verify it.
func TestOpenURLState(t *testing.T) {
	life := newLifecycle()
	t.Cleanup(life.stop)
	srv := newServerRequests(life, newTable(), slog.New(slog.DiscardHandler), &Stats{}, 4, 0)
	sealer, peer, other := newParking(srv, nil, nil), newParking(srv, nil, nil), newParking(srv, nil, nil)
	peer.sealer, sealer.shared, peer.shared = sealer.sealer, true, true
	now := time.Unix(1_800_000_000, 0)
	sealer.sealer.Now = func() time.Time { return now }

	call := func(who string) *transport.Exchange {
		x := &transport.Exchange{Raw: []byte(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"pay","arguments":{},` +
			`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{"url":{}}}}}}`),
			Principal: &auth.Principal{Issuer: "https://issuer", Subject: who}}
		if err := codec.Scan(x.Raw, &x.Msg); err != nil {
			t.Fatal(err)
		}
		return x
	}
	res := sealer.urlElicitation(call("alice"), []byte(`{"code":-32042,"message":"m","data":{"elicitations":[{"mode":"url","url":"https://a","message":"m"},{"mode":"url","url":"https://b","message":"n"}]}}`))
	state := modern.RequestState(codec.Member(res, "result"))
	if !ours(state) {
		t.Fatalf("answer %s: no state of the router's", res)
	}
	if owner, _, _, urls, rej := peer.open(state, call("alice")); !rej.OK() || urls != 2 || owner != sealer.instance {
		t.Fatalf("on a peer with the key: owner %x, %d elicitations (%s), want the sealer's and 2", owner, urls, rej.Message)
	}
	if _, _, _, _, rej := peer.open(state, call("bob")); rej.OK() {
		t.Fatal("another principal's retry was let through")
	}
	if _, _, _, _, rej := other.open(state, call("alice")); rej.Message != rejectOtherInstance.Message {
		t.Fatalf("without the key: %q, want the other-instance refusal", rej.Message)
	}
	now = now.Add(urlStateTTL + time.Second)
	if _, _, _, _, rej := peer.open(state, call("alice")); rej.OK() || !strings.Contains(rej.Message, "expired") {
		t.Fatalf("after the TTL: %q, want it refused as expired", rej.Message)
	}
}

// TestMissingCapability: what a backend's request needs of the client's capabilities,
// URL-mode elicitation included, and the error data naming it.
func TestMissingCapability(t *testing.T) {
	for _, tc := range []struct{ caps, method, params, want, data string }{
		{`{"sampling":{}}`, "sampling/createMessage", `{}`, "", ""},
		{`{}`, "sampling/createMessage", `{}`, "sampling", `{"requiredCapabilities":{"sampling":{}}}`},
		{`{"elicitation":{}}`, "elicitation/create", `{"message":"m"}`, "", ""},
		{`{"elicitation":{}}`, "elicitation/create", `{"mode":"url","url":"u"}`, "elicitation.url", `{"requiredCapabilities":{"elicitation":{"url":{}}}}`},
		{`{"elicitation":{"form":{}}}`, "elicitation/create", `{"mode":"url","url":"u"}`, "elicitation.url", ""},
		{`{"elicitation":{"url":{}}}`, "elicitation/create", `{"mode":"url","url":"u"}`, "", ""},
		{`{}`, "roots/list", `{}`, "roots", ""},
		{`{}`, "ping", `{}`, "", ""},
	} {
		got := missingCapability([]byte(tc.caps), tc.method, []byte(tc.params))
		if got != tc.want {
			t.Errorf("%s %s with %s: missing %q, want %q", tc.method, tc.params, tc.caps, got, tc.want)
		}
		if tc.data != "" && string(requiredCapabilities(got)) != tc.data {
			t.Errorf("%s: data %s, want %s", got, requiredCapabilities(got), tc.data)
		}
	}
}
