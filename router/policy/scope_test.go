package policy

import (
	"io"
	"log/slog"
	"strings"
	"testing"
)

func TestGlob(t *testing.T) {
	for _, tc := range []struct {
		pat, name string
		want      bool
	}{
		{"a__*", "a__echo", true},
		{"a__*", "b__echo", false},
		{"*echo", "a__echo", true},
		{"*", "", true},
		{"", "", true},
		{"", "x", false},
		{"a?c", "abc", true},
		{"a?c", "ac", false},
		{"*/*", "ns/tool", true},
		{"*a*b*c", "xaxbxxc", true},
		{"*a*b*c", "xaxbxxcx", false},
		{"a__echo", "a__echo", true},
		{"a__echo", "a__echo2", false},
		{strings.Repeat("*a", 20) + "b", strings.Repeat("a", 60), false}, // no blow-up
	} {
		if got := glob(tc.pat, tc.name); got != tc.want {
			t.Errorf("glob(%q, %q) = %v, want %v", tc.pat, tc.name, got, tc.want)
		}
	}
}

// TestScope: an engine with a Scope denies (ReasonScope) and hides what the endpoint does
// not expose, before its rules; the rest is up to the rules.
func TestScope(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	sc := Scope{Backends: []string{"a", "b"}, Include: []string{"a__*", "b__echo", "p*"}, Exclude: []string{"a__fail"}}
	bare, err := New(Config{}, Options{Logger: log, Scope: sc})
	if err != nil {
		t.Fatal(err)
	}
	ruled, err := New(Config{Rules: []Rule{{Deny: `mcp.tool == "a__add"`}}}, Options{Logger: log, Scope: sc})
	if err != nil {
		t.Fatal(err)
	}
	if !bare.Filtering() {
		t.Fatal("an engine with a scope and no rules does not filter lists")
	}
	for _, tc := range []struct {
		name  string
		e     *Engine
		in    Input
		allow bool
	}{
		{"included tool", bare, Input{Method: MethodToolsCall, Tool: "a__echo", Backend: "a"}, true},
		{"excluded tool", bare, Input{Method: MethodToolsCall, Tool: "a__fail", Backend: "a"}, false},
		{"not included", bare, Input{Method: MethodToolsCall, Tool: "b__add", Backend: "b"}, false},
		{"other backend", bare, Input{Method: MethodToolsCall, Tool: "a__echo", Backend: "c"}, false},
		{"prompt by pattern", bare, Input{Method: MethodPromptsGet, Prompt: "plan", Backend: "b"}, true},
		{"prompt not included", bare, Input{Method: MethodPromptsGet, Prompt: "other", Backend: "b"}, false},
		{"resource of a served backend", bare, Input{Method: MethodRead, URI: "x:/1", Backend: "b"}, true},
		{"resource of another backend", bare, Input{Method: MethodRead, URI: "x:/1", Backend: "c"}, false},
		{"rules after the scope", ruled, Input{Method: MethodToolsCall, Tool: "a__add", Backend: "a"}, false},
		{"rules allow the rest", ruled, Input{Method: MethodToolsCall, Tool: "a__echo", Backend: "a"}, true},
		{"scope before the rules", ruled, Input{Method: MethodToolsCall, Tool: "a__fail", Backend: "a"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.in
			d := tc.e.Decide(alice, &in)
			if d.Allowed != tc.allow {
				t.Fatalf("Decide: %+v, want allowed %v", d, tc.allow)
			}
			it := Item{Backend: tc.in.Backend}
			switch {
			case tc.in.Tool != "":
				it.Kind, it.Name = ItemTool, tc.in.Tool
			case tc.in.Prompt != "":
				it.Kind, it.Name = ItemPrompt, tc.in.Prompt
			default:
				it.Kind, it.Name = ItemResource, tc.in.URI
			}
			if vis := tc.e.Visible(alice, it); vis != tc.allow {
				t.Fatalf("Visible(%+v) = %v, want %v (a list shows what a call may use)", it, vis, tc.allow)
			}
		})
	}
	in := Input{Method: MethodToolsCall, Tool: "a__fail", Backend: "a"}
	d := bare.Decide(alice, &in)
	if d.Reason != ReasonScope || !strings.Contains(d.Message(&in), `tool "a__fail" (not exposed by this endpoint)`) {
		t.Fatalf("out of scope: %+v %q", d, d.Message(&in))
	}
	if n := bare.Stats().Decisions["scope"]; n == 0 {
		t.Fatal("scope denials are not counted")
	}
}

func TestScopeValidate(t *testing.T) {
	if err := (&Scope{Include: []string{"a", ""}}).Validate("virtual_servers[1]"); err == nil || !strings.Contains(err.Error(), "virtual_servers[1].include[1]") {
		t.Fatalf("empty include pattern: %v", err)
	}
	if err := (&Scope{Backends: []string{""}}).Validate("vs"); err == nil || !strings.Contains(err.Error(), "vs.backends[0]") {
		t.Fatalf("empty backend: %v", err)
	}
	if err := (&Scope{Include: []string{"a*"}, Exclude: []string{"?b"}}).Validate("vs"); err != nil {
		t.Fatal(err)
	}
}
