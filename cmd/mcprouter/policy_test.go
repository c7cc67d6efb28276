package main

// End-to-end tests of the policy (issue 14): mcprouter runs as a real process with
// static bearer tokens in front of two reference backends with many tools, listed a
// few at a time; the Go SDK client and raw HTTP (mcpraw) check allowed and denied
// calls, lists filtered per principal across the merged pages, a batch whose elements
// are decided one by one, and rate limits per principal and per tool.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcprouter/mcprouter/cmd/mcpbackend/mcpbackendtest"
	backendsrv "github.com/mcprouter/mcprouter/cmd/mcpbackend/server"
	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/internal/mcpraw"
	"github.com/mcprouter/mcprouter/internal/testbin"
	"github.com/mcprouter/mcprouter/internal/testwait"
)

// policyTokens are the bearer tokens of the policy router, by principal.
var policyTokens = map[string]string{
	"alice": "alice-policy-token-11", "bob": "bob-policy-token-22", "carol": "carol-policy-token-33",
	"dave": "dave-policy-token-44", "erin": "erin-policy-token-55",
}

// startPolicyRouter starts a router in front of backends a and b (150 extra tools each,
// 7 per page of their own lists: the router's merged list has several pages of 100)
// with the policy of the example, widened to the test's principals.
func startPolicyRouter(t *testing.T) *routerProc {
	t.Helper()
	backends := mcpbackendtest.StartAB(t, backendsrv.Config{Tick: -1, ExtraTools: 150, PageSize: 7})
	addr := testbin.FreeAddr(t)
	var tokens strings.Builder
	for _, p := range []string{"alice", "bob", "carol", "dave", "erin"} {
		scopes := "[mcp]"
		if p == "carol" {
			scopes = "[mcp, admin]"
		}
		fmt.Fprintf(&tokens, "    - {principal: %s, sha256: %q, scopes: %s}\n", p, sha256Hex(policyTokens[p]), scopes)
	}
	cfg := backends + fmt.Sprintf(`admin: {listen: "127.0.0.1:0"}
auth:
  mode: bearer
  resource: http://%s/mcp
  required_scopes: [mcp]
  bearer_tokens:
%spolicy:
  rules:
    - allow: 'principal.sub in ["alice", "dave", "erin"] || "admin" in principal.scopes'
    - name: bob-echo
      allow: 'principal.sub == "bob" && (mcp.tool == "a__echo" || mcp.backend == "b")'
    - name: no-fail
      deny: 'mcp.tool == "a__fail" && !("admin" in principal.scopes)'
  limits:
    - name: dave-per-tool
      match: 'principal.sub == "dave"'
      key: [principal, tool]
      rate: 1
      per: 1h
      burst: 2
    - name: erin-total
      match: 'principal.sub == "erin"'
      key: principal
      rate: 1
      per: 1h
      burst: 1
  audit: true
`, addr, tokens.String())
	return startRouter(t, "--config", writeConfig(t, cfg), "--listen", addr)
}

// policySession connects the Go SDK client as principal.
func policySession(t *testing.T, r *routerProc, principal string) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	c := mcp.NewClient(&mcp.Implementation{Name: "policy-e2e", Version: "1"}, nil)
	s, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: r.url("/mcp"), HTTPClient: authClient(policyTokens[principal]), MaxRetries: -1}, nil)
	if err != nil {
		t.Fatalf("%s: connect: %v", principal, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// toolNames lists every tool s sees, following the cursors, and counts the pages.
func toolNames(t *testing.T, s *mcp.ClientSession) (names []string, pages int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	cursor := ""
	for range 100 {
		res, err := s.ListTools(ctx, &mcp.ListToolsParams{Cursor: cursor})
		if err != nil {
			t.Fatalf("tools/list: %v", err)
		}
		pages++
		for _, tl := range res.Tools {
			names = append(names, tl.Name)
		}
		if cursor = res.NextCursor; cursor == "" {
			return names, pages
		}
	}
	t.Fatal("tools/list: more than 100 pages")
	return nil, 0
}

// TestPolicyCallsAndLists: each principal calls what the rules allow and gets -32017
// naming the tool (and the rule, for a deny) for the rest; tools/list shows each one
// exactly the tools a call to which is allowed, across the merged pages of both
// backends.
func TestPolicyCallsAndLists(t *testing.T) {
	r := startPolicyRouter(t)
	alice, bob, carol := policySession(t, r, "alice"), policySession(t, r, "bob"), policySession(t, r, "carol")

	all, pages := toolNames(t, carol)
	if len(all) < 300 || pages < 4 {
		t.Fatalf("carol sees %d tools in %d pages, want every tool of both backends over several pages", len(all), pages)
	}
	want := func(keep func(string) bool) []string {
		var out []string
		for _, n := range all {
			if keep(n) {
				out = append(out, n)
			}
		}
		return out
	}
	cases := []struct {
		who  string
		s    *mcp.ClientSession
		want []string
	}{
		{"alice", alice, want(func(n string) bool { return n != "a__fail" })},
		{"bob", bob, want(func(n string) bool { return n == "a__echo" || strings.HasPrefix(n, "b__") })},
	}
	for _, c := range cases {
		got, pages := toolNames(t, c.s)
		if !slices.Equal(got, c.want) {
			t.Errorf("%s sees %d tools, want %d (first differences: %v)", c.who, len(got), len(c.want), firstDiff(got, c.want))
		}
		t.Logf("%s sees %d of %d tools in %d page(s)", c.who, len(got), len(all), pages)
		if c.who == "bob" && pages < 2 {
			t.Errorf("bob's %d tools in %d page(s), want the filtered list paged", len(got), pages)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	call := func(s *mcp.ClientSession, tool string) error {
		_, err := s.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"text": "hi", "message": "x"}})
		return err
	}
	for _, c := range []struct {
		who     string
		s       *mcp.ClientSession
		tool    string
		denied  bool
		mention string
	}{
		{"alice", alice, "a__echo", false, ""},
		{"alice", alice, "b__echo", false, ""},
		{"alice", alice, "a__fail", true, `rule "no-fail"`},
		{"carol", carol, "a__fail", false, ""},
		{"bob", bob, "a__echo", false, ""},
		{"bob", bob, "b__echo", false, ""},
		{"bob", bob, "a__payload", true, `"a__payload"`},
	} {
		err := call(c.s, c.tool)
		switch {
		case !c.denied && err != nil:
			t.Errorf("%s calling %s: %v, want allowed", c.who, c.tool, err)
		case c.denied && (err == nil || !strings.Contains(err.Error(), "policy denies") || !strings.Contains(err.Error(), c.mention)):
			t.Errorf("%s calling %s: %v, want a denial mentioning %s", c.who, c.tool, err, c.mention)
		}
	}
}

// firstDiff shows a few names in one list and not the other, for a failure message.
func firstDiff(got, want []string) []string {
	var out []string
	for _, n := range want {
		if !slices.Contains(got, n) && len(out) < 5 {
			out = append(out, "missing "+n)
		}
	}
	for _, n := range got {
		if !slices.Contains(want, n) && len(out) < 10 {
			out = append(out, "extra "+n)
		}
	}
	return out
}

// rawError is the error member of a JSON-RPC reply.
type rawError struct {
	ID    json.RawMessage `json:"id"`
	Error *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Data    struct {
			RetryAfterMs int `json:"retryAfterMs"`
		} `json:"data"`
	} `json:"error"`
}

// rawClient opens a 2025-03-26 session (batches allowed) as principal.
func rawClient(t *testing.T, r *routerProc, principal string) *mcpraw.Client {
	t.Helper()
	c := &mcpraw.Client{URL: r.url("/mcp"), Token: policyTokens[principal], Version: "2025-03-26", HTTP: &http.Client{Timeout: testTimeout}}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if rep, err := c.Initialize(ctx, "{}"); err != nil || rep.Status != 200 || c.Session == "" {
		t.Fatalf("%s: initialize: %v %v", principal, err, rep)
	}
	return c
}

// post sends body, which must be answered 200, and returns the JSON-RPC replies, a
// batch's elements one by one.
func post(t *testing.T, c *mcpraw.Client, body string) []rawError {
	t.Helper()
	rep, out := postStatus(t, c, body)
	if rep.Status != 200 {
		t.Fatalf("POST %s: %v", body, rep)
	}
	return out
}

// postStatus is post whatever the HTTP status, which it returns with the headers.
func postStatus(t *testing.T, c *mcpraw.Client, body string) (*mcpraw.Reply, []rawError) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	rep, err := c.Post(ctx, body)
	if err != nil {
		t.Fatalf("POST %s: %v", body, err)
	}
	var out []rawError
	for _, m := range rep.Messages() {
		var one rawError
		if json.Unmarshal(m, &one) == nil {
			out = append(out, one)
			continue
		}
		var many []rawError
		if err := json.Unmarshal(m, &many); err != nil {
			t.Fatalf("reply %s: %v", m, err)
		}
		out = append(out, many...)
	}
	return rep, out
}

func callBody(id int, tool string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":{"text":"hi","message":"x"}}}`, id, tool)
}

// TestPolicyBatch: a 2025-03-26 batch with allowed and denied calls gets each element
// decided on its own: results for the allowed ones, -32017 for the denied ones.
func TestPolicyBatch(t *testing.T) {
	r := startPolicyRouter(t)
	c := rawClient(t, r, "bob")
	batch := "[" + callBody(1, "a__echo") + "," + callBody(2, "a__fail") + "," + callBody(3, "b__echo") + "," + callBody(4, "a__payload") + "]"
	replies := post(t, c, batch)
	if len(replies) != 4 {
		t.Fatalf("%d replies to a batch of 4: %+v", len(replies), replies)
	}
	denied := map[string]bool{"1": false, "2": true, "3": false, "4": true}
	for _, rep := range replies {
		want, ok := denied[string(rep.ID)]
		if !ok {
			t.Fatalf("reply with id %s", rep.ID)
		}
		delete(denied, string(rep.ID))
		switch {
		case want && (rep.Error == nil || rep.Error.Code != codec.CodePolicyDenied):
			t.Errorf("element %s: %+v, want -32017", rep.ID, rep.Error)
		case !want && rep.Error != nil:
			t.Errorf("element %s: %+v, want a result", rep.ID, rep.Error)
		}
	}
}

// TestPolicyRateLimits: dave's limit keys on the principal and the tool (two calls of
// each tool, the third of one tool refused while another tool still goes through);
// erin's on the principal alone (one call in all). A refusal is -32018 with
// data.retryAfterMs, answered 429 with Retry-After (the POST's one request is refused
// whole); other principals are not counted.
func TestPolicyRateLimits(t *testing.T) {
	r := startPolicyRouter(t)
	dave, erin, alice := rawClient(t, r, "dave"), rawClient(t, r, "erin"), rawClient(t, r, "alice")
	limited := func(who string, rep []rawError) bool {
		t.Helper()
		if len(rep) != 1 {
			t.Fatalf("%s: %d replies", who, len(rep))
		}
		e := rep[0].Error
		if e == nil {
			return false
		}
		if e.Code != codec.CodeRateLimited || e.Data.RetryAfterMs <= 0 {
			t.Fatalf("%s: error %+v, want -32018 with retryAfterMs", who, e)
		}
		return true
	}
	for i, c := range []struct {
		who     string
		c       *mcpraw.Client
		tool    string
		limited bool
	}{
		{"dave", dave, "a__echo", false},
		{"dave", dave, "a__echo", false},
		{"dave", dave, "a__echo", true},
		{"dave", dave, "b__echo", false},
		{"erin", erin, "a__echo", false},
		{"erin", erin, "b__echo", true},
		{"alice", alice, "a__echo", false},
		{"alice", alice, "a__echo", false},
		{"alice", alice, "a__echo", false},
	} {
		rep, errs := postStatus(t, c.c, callBody(10+i, c.tool))
		if got := limited(c.who, errs); got != c.limited {
			t.Errorf("call %d: %s calling %s limited %v, want %v", i, c.who, c.tool, got, c.limited)
		}
		switch {
		case c.limited && (rep.Status != http.StatusTooManyRequests || rep.Header.Get("Retry-After") == "" || rep.Header.Get("Retry-After") == "0"):
			t.Errorf("call %d: limited with HTTP %d, Retry-After %q; want 429 with a wait in seconds", i, rep.Status, rep.Header.Get("Retry-After"))
		case !c.limited && rep.Status != http.StatusOK:
			t.Errorf("call %d: HTTP %d, want 200", i, rep.Status)
		}
	}
	// audit: true: a line for the refusals and for the calls that went through.
	testwait.For(t, "the audit lines of a limited and a forwarded call", testTimeout, func() bool {
		return r.Log.Contains(`msg="policy audit" principal=dave`) && r.Log.Contains("outcome=limited") &&
			r.Log.Contains("limit=dave-per-tool") && r.Log.Contains("outcome=ok")
	})
}

// TestPolicyWholeRequestRefused: a POST whose one request the rules deny is answered 403
// (with the -32017 error in its body); a batch whose every element is denied is not
// refused whole: 200 and an error per element, as any batch.
func TestPolicyWholeRequestRefused(t *testing.T) {
	r := startPolicyRouter(t)
	bob := rawClient(t, r, "bob")
	rep, errs := postStatus(t, bob, callBody(1, "a__fail"))
	if rep.Status != http.StatusForbidden || len(errs) != 1 || errs[0].Error == nil || errs[0].Error.Code != codec.CodePolicyDenied {
		t.Fatalf("bob's denied call: %v, want 403 with -32017", rep)
	}
	if rep, errs := postStatus(t, bob, callBody(2, "a__echo")); rep.Status != http.StatusOK || len(errs) != 1 || errs[0].Error != nil {
		t.Fatalf("bob's allowed call: %v, want 200 with a result", rep)
	}
	rep, errs = postStatus(t, bob, "["+callBody(3, "a__fail")+","+callBody(4, "a__payload")+"]")
	if rep.Status != http.StatusOK || len(errs) != 2 {
		t.Fatalf("a batch of two denied calls: %v, want 200 with two errors", rep)
	}
	for _, e := range errs {
		if e.Error == nil || e.Error.Code != codec.CodePolicyDenied {
			t.Errorf("batch element %s: %+v, want -32017", e.ID, e.Error)
		}
	}
}
