package fleet

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/router/policy"
)

// benchPolicy is the figure: 20 rules (19 deny rules that do not match the
// call, then the allow rule that does) and a rate limit keyed on principal and tool,
// generous enough never to refuse.
func benchPolicy(tb testing.TB) *policy.Engine {
	tb.Helper()
	var cfg policy.Config
	for i := range 19 {
		cfg.Rules = append(cfg.Rules, policy.Rule{Deny: fmt.Sprintf(`mcp.tool == "a__blocked_%d" && !("admin" in principal.scopes)`, i)})
	}
	cfg.Rules = append(cfg.Rules, policy.Rule{Allow: `mcp.backend == "a" && mcp.method == "tools/call"`})
	cfg.Limits = []policy.Limit{{Name: "per-tool", Key: policy.KeyParts{policy.KeyPrincipal, policy.KeyTool}, Rate: 1e9, Burst: 1e9}}
	e, err := policy.New(cfg, policy.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		tb.Fatal(err)
	}
	return e
}

// BenchmarkForwardPolicy is BenchmarkForwardRoundTrip (a 2025 session) without a policy
// and with benchPolicy, side by side in one run.
func BenchmarkForwardPolicy(b *testing.B) {
	for _, withPolicy := range []bool{false, true} {
		name := "none"
		if withPolicy {
			name = "rules20-limit"
		}
		b.Run(name, func(b *testing.B) {
			fc := newFleetClientEra(b, time.Minute, false)
			if withPolicy {
				fc.f.SetPolicy(benchPolicy(b))
			}
			benchToolCalls(b, fc)
		})
	}
}

// TestForwardPolicyDenies: the fleet answers a call the policy denies with -32017
// naming the tool and the rule, without sending it upstream, and forwards the allowed
// one (the rule reads the arguments: the same tool is allowed without them).
func TestForwardPolicyDenies(t *testing.T) {
	fc := newFleetClientEra(t, time.Minute, false)
	e, err := policy.New(policy.Config{Rules: []policy.Rule{
		{Name: "no-block", Deny: `mcp.tool == "a__echo" && has(mcp.arguments.block) && mcp.arguments.block == true`},
	}}, policy.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	fc.f.SetPolicy(e)
	fc.send(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"a__echo","arguments":{"block":true}}}`)
	if r := fc.read(); r.Kind != codec.KindError || !strings.Contains(string(r.Error), `"code":-32017`) ||
		!strings.Contains(string(r.Error), `\"a__echo\" (rule \"no-block\")`) {
		t.Fatalf("denied call answered %s, want -32017 naming the tool and the rule", r.Error)
	}
	fc.send(`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"a__echo","arguments":{}}}`)
	m := fc.upstream()
	fc.answer(m.ID, `{"content":[]}`)
	if r := fc.read(); r.Kind != codec.KindResult {
		t.Fatalf("allowed call answered %+v, want a result", r)
	}
}
