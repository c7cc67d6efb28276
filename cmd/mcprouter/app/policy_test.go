package app

import (
	"strings"
	"testing"
)

// TestPolicyConfig: the policy section is parsed and validated with the rest of the
// configuration; an error names the rule (index and name), the key and the position in
// the CEL expression, every problem at once.
func TestPolicyConfig(t *testing.T) {
	good := `policy:
  rules:
    - allow: 'principal.sub == "alice"'
    - allow: 'principal.sub == "bob" && mcp.tool == "ref__echo"'
    - deny: 'mcp.tool == "ref__fail" && !("admin" in principal.scopes)'
  limits:
    - {name: per-principal, key: principal, rate: 100, burst: 200}
    - {match: 'mcp.method == "tools/call"', key: [principal, tool], rate: 10}
  audit: true
`
	cfg, err := ParseConfig([]byte(good))
	if err != nil {
		t.Fatalf("the issue's example: %v", err)
	}
	if len(cfg.Policy.Rules) != 3 || len(cfg.Policy.Limits) != 2 || !cfg.Policy.Audit {
		t.Fatalf("parsed %+v", cfg.Policy)
	}
	bad := `policy:
  rules:
    - allow: 'principal.sub == "alice"'
    - name: broken
      allow: 'principal.sub == '
    - deny: 'mcp.nope == 1'
`
	_, err = ParseConfig([]byte(bad))
	if err == nil {
		t.Fatal("a broken rule accepted")
	}
	for _, want := range []string{"policy.rules[1] (broken).allow at 1:", "policy.rules[2].deny at 1:"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "policy: policy.") {
		t.Errorf("error %q says policy twice", err)
	}
}
