package policy

import (
	"errors"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// The keys of the issue, as outside users write them, load and compile.
func TestConfigIssueExample(t *testing.T) {
	const doc = `
rules:
  - allow: 'principal.sub == "alice"'
  - allow: 'principal.sub == "bob" && mcp.tool == "ref__echo"'
  - deny: 'mcp.tool == "ref__fail" && !("admin" in principal.scopes)'
limits:
  - name: per-principal
    key: principal
    rate: 100
  - match: 'mcp.method == "tools/call"'
    key: [principal, tool]
    rate: 10
    per: 1m
    burst: 3
  - key: principal+backend
    rate: 1.5
audit: true
`
	var cfg Config
	if err := yaml.Unmarshal([]byte(doc), &cfg); err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if !cfg.Audit || len(cfg.Rules) != 3 || cfg.Rules[2].Deny == "" {
		t.Fatalf("parsed %+v", cfg)
	}
	if got := cfg.Limits[1].Key; len(got) != 2 || got[0] != KeyPrincipal || got[1] != KeyTool {
		t.Fatalf("key list: %v", got)
	}
	if got := cfg.Limits[2].Key; len(got) != 2 || got[1] != KeyBackend {
		t.Fatalf("key string: %v", got)
	}
	d := cfg.withDefaults()
	if d.Rules[0].Name != "rules[0]" || d.Limits[1].Name != "limits[1]" {
		t.Errorf("default names: %q %q", d.Rules[0].Name, d.Limits[1].Name)
	}
	if d.Limits[0].Burst != 100 || d.Limits[0].Per != time.Second || d.Limits[1].Per != time.Minute || d.Limits[2].Burst != 2 || d.Limits[1].Burst != 3 {
		t.Errorf("default bursts and periods: %+v", d.Limits)
	}
	if d.SyncInterval != DefaultSyncInterval || d.ViewCache != DefaultViewCache || d.Limits[0].MaxKeys != DefaultMaxKeys {
		t.Errorf("defaults: %+v", d)
	}
	out, err := yaml.Marshal(cfg.Limits[1].Key)
	if err != nil || strings.TrimSpace(string(out)) != "- principal\n- tool" {
		t.Errorf("key marshals as %q, %v", out, err)
	}
}

func TestConfigKeyErrors(t *testing.T) {
	for _, doc := range []string{`key: [principal, user]`, `key: principal+nobody`, `key: {a: b}`} {
		var l Limit
		if err := yaml.Unmarshal([]byte(doc), &l); err == nil {
			t.Errorf("%s: accepted", doc)
		}
	}
}

// Errors name the rule (index and name), the key, and for CEL the position; every
// problem is reported at once.
func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want []string // substrings of the error, each required
	}{
		{"undeclared", Config{Rules: []Rule{{Allow: "true"}, {Name: "typo", Deny: `mcp.tol == "x"`}}},
			[]string{"policy.rules[1] (typo).deny at 1:1: undeclared reference to 'mcp'"}},
		{"syntax", Config{Rules: []Rule{{Allow: `principal.sub == `}}},
			[]string{"policy.rules[0].allow at 1:18: Syntax error"}},
		{"second line", Config{Rules: []Rule{{Allow: "true &&\n  principal.nope"}}},
			[]string{"policy.rules[0].allow at 2:"}},
		{"not bool", Config{Rules: []Rule{{Name: "n", Allow: `principal.sub`}}},
			[]string{"policy.rules[0] (n).allow: must be a bool expression, this one is of type string"}},
		{"type error", Config{Rules: []Rule{{Deny: `principal.scopes == "x"`}}},
			[]string{"policy.rules[0].deny at 1:", "no matching overload"}},
		{"neither", Config{Rules: []Rule{{Name: "empty"}}},
			[]string{"policy.rules[0] (empty): needs allow or deny"}},
		{"both", Config{Rules: []Rule{{Allow: "true", Deny: "false"}}},
			[]string{"policy.rules[0]: has both allow and deny"}},
		{"same name", Config{Rules: []Rule{{Name: "a", Allow: "true"}, {Name: "a", Deny: "false"}}},
			[]string{"policy.rules[1] (a).name: another rule has this name"}},
		{"limit", Config{Limits: []Limit{{Name: "l", Rate: 0, Match: "mcp.method ="}, {Rate: 1, Burst: -1, Key: KeyParts{KeyTool, KeyTool}}}},
			[]string{"policy.limits[0] (l).rate: must be a positive", "policy.limits[0] (l).match at 1:", "policy.limits[1].burst", "policy.limits[1].key: tool appears twice"}},
		{"limit names", Config{Limits: []Limit{{Name: "x", Rate: 1}, {Name: "x", Rate: 2}}},
			[]string{"policy.limits[1] (x).name: another limit has this name"}},
		{"several", Config{Rules: []Rule{{Allow: "1 +"}, {Deny: "mcp.nope"}}},
			[]string{"policy.rules[0].allow", "policy.rules[1].deny"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.cfg, Options{})
			if err == nil {
				t.Fatal("accepted")
			}
			if verr := tc.cfg.Validate(); verr == nil || verr.Error() != err.Error() {
				t.Errorf("Validate says %v, New says %v", verr, err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error\n%v\nlacks %q", err, w)
				}
			}
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Errorf("no *ConfigError in %v", err)
			}
		})
	}
}
