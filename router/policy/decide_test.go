package policy

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/mcprouter/mcprouter/transport/auth"
)

// The issue's example policy.
var issueRules = []Rule{
	{Allow: `principal.sub == "alice"`},
	{Name: "bob-echo", Allow: `principal.sub == "bob" && mcp.tool == "ref__echo"`},
	{Name: "no-fail", Deny: `mcp.tool == "ref__fail" && !("admin" in principal.scopes)`},
}

var (
	alice = NewSubject(&auth.Principal{Subject: "alice"})
	admin = NewSubject(&auth.Principal{Subject: "alice", Scopes: []string{"admin"}})
	bob   = NewSubject(&auth.Principal{Subject: "bob", Issuer: "https://idp.example", Claims: map[string]any{"team": "red", "level": float64(3)}})
	carol = NewSubject(&auth.Principal{Subject: "carol"})
)

func mustEngine(t testing.TB, cfg Config) *Engine {
	t.Helper()
	e, err := New(cfg, Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func mustInput(t testing.TB, raw string) *Input {
	t.Helper()
	in := new(Input)
	if err := ParseInput([]byte(raw), in); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	return in
}

func call(tool, args string) string {
	if args == "" {
		return `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + tool + `"}}`
	}
	return `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + tool + `","arguments":` + args + `}}`
}

func TestDecide(t *testing.T) {
	issue := mustEngine(t, Config{Rules: issueRules})
	denyOnly := mustEngine(t, Config{Rules: []Rule{{Name: "no-fail", Deny: `mcp.tool == "ref__fail"`}}})
	none := mustEngine(t, Config{})
	args := mustEngine(t, Config{Rules: []Rule{
		{Name: "small", Allow: `mcp.arguments.n < 10`},
		{Name: "no-secrets", Deny: `has(mcp.arguments.path) && mcp.arguments.path.startsWith("/secrets")`},
	}})
	claims := mustEngine(t, Config{Rules: []Rule{{Name: "red", Allow: `principal.claims.team == "red" && principal.claims.level >= 3 && principal.iss == "https://idp.example"`}}})
	dyn := mustEngine(t, Config{Rules: []Rule{{Name: "dyn", Allow: `principal.claims.team`}}})
	backend := mustEngine(t, Config{Rules: []Rule{{Name: "ref-only", Allow: `mcp.backend == "ref" && mcp.method in ["tools/call", "resources/read", "resources/subscribe"]`}}})

	for _, tc := range []struct {
		name    string
		e       *Engine
		s       *Subject
		raw     string
		backend string
		allowed bool
		reason  Reason
		rule    string
	}{
		{"alice any tool", issue, alice, call("ref__echo", ""), "", true, ReasonAllow, "rules[0]"},
		{"bob echo", issue, bob, call("ref__echo", ""), "", true, ReasonAllow, "bob-echo"},
		{"bob other", issue, bob, call("ref__add", ""), "", false, ReasonNoAllow, ""},
		{"carol nothing", issue, carol, call("ref__echo", ""), "", false, ReasonNoAllow, ""},
		{"deny wins over allow", issue, alice, call("ref__fail", ""), "", false, ReasonDeny, "no-fail"},
		{"admin escapes the deny", issue, admin, call("ref__fail", ""), "", true, ReasonAllow, "rules[0]"},
		{"prompt", issue, carol, `{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"p"}}`, "", false, ReasonNoAllow, ""},
		{"read", issue, carol, `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"x:/a"}}`, "", false, ReasonNoAllow, ""},
		{"subscribe", issue, carol, `{"jsonrpc":"2.0","id":1,"method":"resources/subscribe","params":{"uri":"x:/a"}}`, "", false, ReasonNoAllow, ""},
		{"completion", issue, carol, `{"jsonrpc":"2.0","id":1,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"p"},"argument":{"name":"a","value":"b"}}}`, "", false, ReasonNoAllow, ""},

		// What the rules do not decide is allowed, whoever asks.
		{"initialize", issue, carol, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`, "", true, ReasonExempt, ""},
		{"ping", issue, carol, `{"jsonrpc":"2.0","id":1,"method":"ping"}`, "", true, ReasonExempt, ""},
		{"list", issue, carol, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, "", true, ReasonExempt, ""},
		{"notification", issue, carol, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, "", true, ReasonExempt, ""},
		{"unsubscribe", issue, carol, `{"jsonrpc":"2.0","id":1,"method":"resources/unsubscribe","params":{"uri":"x:/a"}}`, "", true, ReasonExempt, ""},

		{"deny only: others pass", denyOnly, carol, call("ref__echo", ""), "", true, ReasonNoRules, ""},
		{"deny only: denied", denyOnly, carol, call("ref__fail", ""), "", false, ReasonDeny, "no-fail"},
		{"no rules", none, carol, call("x", ""), "", true, ReasonNoRules, ""},

		{"escaped name", denyOnly, carol, call(`ref__f\u0061il`, ""), "", false, ReasonDeny, "no-fail"},

		{"args int", args, carol, call("t", `{"n":3}`), "", true, ReasonAllow, "small"},
		{"args int too big", args, carol, call("t", `{"n":30}`), "", false, ReasonNoAllow, ""},
		{"args double", args, carol, call("t", `{"n":3.5}`), "", true, ReasonAllow, "small"},
		{"args deny", args, carol, call("t", `{"n":1,"path":"/secrets/key"}`), "", false, ReasonDeny, "no-secrets"},
		{"args escaped key", args, carol, call("t", `{"n":1,"p\u0061th":"/secrets/key"}`), "", false, ReasonDeny, "no-secrets"},
		// A repeated member is a denial: the backend may read the other one.
		{"args duplicate key", args, carol, call("t", `{"n":1,"path":"/public","path":"/secrets/key"}`), "", false, ReasonError, "no-secrets"},
		{"args duplicate arguments", args, carol, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{"n":1},"arguments":{"n":99}}}`, "", false, ReasonError, "no-secrets"},
		{"args missing key", args, carol, call("t", `{}`), "", false, ReasonError, "small"},
		{"args absent", args, carol, call("t", ""), "", false, ReasonError, "small"},
		{"args not an object", args, carol, call("t", `[1]`), "", false, ReasonError, "no-secrets"},
		{"completion args", args, carol, `{"jsonrpc":"2.0","id":1,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"p"},"argument":{"name":"n","value":2},"context":{"arguments":{"path":"/public"}}}}`, "", true, ReasonAllow, "small"},
		{"completion context args", args, carol, `{"jsonrpc":"2.0","id":1,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"p"},"argument":{"name":"n","value":2},"context":{"arguments":{"path":"/secrets/x"}}}}`, "", false, ReasonDeny, "no-secrets"},

		{"claims", claims, bob, call("t", ""), "", true, ReasonAllow, "red"},
		// CEL's && is false when any side is false, even if another fails.
		{"no claims", claims, alice, call("t", ""), "", false, ReasonNoAllow, ""},
		{"dyn not bool", dyn, bob, call("t", ""), "", false, ReasonError, "dyn"},

		{"backend", backend, carol, call("ref__echo", ""), "ref", true, ReasonAllow, "ref-only"},
		{"other backend", backend, carol, call("x__echo", ""), "x", false, ReasonNoAllow, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for round := range 2 { // the first call plans, the second uses the plan
				in := mustInput(t, tc.raw)
				in.Backend = tc.backend
				d := tc.e.Decide(tc.s, in)
				if d.Allowed != tc.allowed || d.Reason != tc.reason || d.Name != tc.rule {
					t.Fatalf("call %d: got allowed=%v reason=%v rule=%q err=%v, want %v %v %q", round, d.Allowed, d.Reason, d.Name, d.Err, tc.allowed, tc.reason, tc.rule)
				}
				if (d.Reason == ReasonError) != (d.Err != nil) {
					t.Errorf("reason %v with err %v", d.Reason, d.Err)
				}
			}
			in := mustInput(t, tc.raw)
			in.Backend = tc.backend
			d := tc.e.Decide(tc.s, in)
			if (d.Reason == ReasonError) != (d.Err != nil) {
				t.Errorf("reason %v with err %v", d.Reason, d.Err)
			}
			if (d.Rule >= 0) != (d.Name != "") {
				t.Errorf("rule index %d, name %q", d.Rule, d.Name)
			}
		})
	}
}

// The deny message names what was denied and by which rule, never the evaluation
// error's text.
func TestDecisionMessage(t *testing.T) {
	e := mustEngine(t, Config{Rules: issueRules})
	for _, tc := range []struct {
		s    *Subject
		raw  string
		want string
	}{
		{alice, call("ref__fail", ""), `policy denies tools/call of tool "ref__fail" (rule "no-fail")`},
		{carol, call("ref__echo", ""), `policy denies tools/call of tool "ref__echo" (no allow rule matches)`},
		{carol, `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"file:///a\"b"}}`, `policy denies resources/read of "file:///a\"b" (no allow rule matches)`},
		{carol, `{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"greet"}}`, `policy denies prompts/get of prompt "greet" (no allow rule matches)`},
	} {
		in := mustInput(t, tc.raw)
		d := e.Decide(tc.s, in)
		if got := d.Message(in); got != tc.want {
			t.Errorf("got  %s\nwant %s", got, tc.want)
		}
	}
	errEngine := mustEngine(t, Config{Rules: []Rule{{Name: "n", Allow: `mcp.arguments.n > 1`}}})
	in := mustInput(t, call("t", `{}`))
	d := errEngine.Decide(carol, in)
	if got, want := d.Message(in), `policy denies tools/call of tool "t" (rule "n" could not be evaluated)`; got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// An evaluation error is logged with the rule, and counted.
func TestDecideErrorReported(t *testing.T) {
	var logs bytes.Buffer
	e, err := New(Config{Rules: []Rule{{Name: "n", Allow: `mcp.arguments.n > 1`}}}, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	e.Decide(carol, mustInput(t, call("t", `{}`)))
	e.Decide(carol, mustInput(t, call("t", `{"n":5}`)))
	if !strings.Contains(logs.String(), "rule=n") || !strings.Contains(logs.String(), "no such key") {
		t.Errorf("log: %s", logs.String())
	}
	st := e.Stats()
	if st.Decisions["error"] != 1 || st.Decisions["allow"] != 1 || st.DeniedByRule["n"] != 1 {
		t.Errorf("stats: %+v", st)
	}
}

// A subscriptions/listen entry is decided as the resources/subscribe of its URI.
func TestListenEntry(t *testing.T) {
	e := mustEngine(t, Config{Rules: []Rule{{Allow: `mcp.method == "resources/subscribe" && mcp.uri.startsWith("pub:") && mcp.backend == "b"`}}})
	var in Input
	in.ListenEntry("pub:/x", "b")
	if d := e.Decide(carol, &in); !d.Allowed {
		t.Errorf("pub:/x denied: %+v", d)
	}
	in.ListenEntry("priv:/x", "b")
	if d := e.Decide(carol, &in); d.Allowed {
		t.Errorf("priv:/x allowed")
	}
}

func TestParseInputErrors(t *testing.T) {
	for _, raw := range []string{
		`{"jsonrpc":"2.0","id":1,"result":{}}`,
		`not json`,
		`{"jsonrpc":"2.0","id":1,"method":"completion/complete","params":{"ref":"x"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"a","name":"b"}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"completion/complete","params":{"ref":{},"ref":{}}}`,
	} {
		var in Input
		err := ParseInput([]byte(raw), &in)
		if err == nil {
			t.Errorf("%s: accepted", raw)
		}
		if strings.HasPrefix(raw, `{"jsonrpc"`) && !errors.Is(err, ErrInput) {
			t.Errorf("%s: %v is not ErrInput", raw, err)
		}
	}
	in := mustInput(t, `{"jsonrpc":"2.0","id":1,"method":"completion/complete","params":{"ref":{"type":"ref/resource","uri":"file:///{path}"},"argument":{"name":"path","value":"a"}}}`)
	if in.URI != "file:///{path}" || in.Prompt != "" {
		t.Errorf("completion of a template: %+v", in)
	}
}
