package fleet

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/router/policy"
	"github.com/mcprouter/mcprouter/transport/auth"
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

// BenchmarkListPolicy is the list figure: a client listing every tool of a
// catalog of 1,000 (10 backends of 100, pages of 100) without a policy, and as a
// principal whom 20 rules allow one backend's tools (10%), the filter's cache warm as
// after the first list. Each op is the whole listing: 10 pages unfiltered, 1 filtered.
func BenchmarkListPolicy(b *testing.B) {
	lb := newListBench(b)
	for _, c := range []struct {
		name string
		e    *policy.Engine
		want int
	}{{"unfiltered", nil, 1000}, {"filtered-10pct", lb.e, 100}} {
		b.Run(c.name, func(b *testing.B) {
			if n := lb.listAll(b, c.e); n != c.want {
				b.Fatalf("listed %d tools, want %d", n, c.want)
			}
			b.ReportAllocs()
			for b.Loop() {
				lb.listAll(b, c.e)
			}
		})
	}
}

// listBench is the catalog, the policy and the principal of the list figures.
type listBench struct {
	cat *catalog
	e   *policy.Engine
	p   *policer
	sub *policy.Subject
	buf []byte
}

func newListBench(b *testing.B) *listBench {
	cat := &catalog{gen: 1}
	for bi := range 10 {
		name := fmt.Sprintf("b%d", bi)
		cat.backends = append(cat.backends, &backend{cfg: BackendConfig{Name: name}})
		var list []item
		for i := range 100 {
			n := fmt.Sprintf("%s__tool%03d", name, i)
			list = append(list, item{key: n, raw: []byte(`{"name":"` + n + `","inputSchema":{"type":"object"}}`)})
		}
		for k := kind(0); k < numKinds; k++ {
			cat.lists[k] = append(cat.lists[k], nil)
		}
		cat.lists[kTools][bi] = list
	}
	var cfg policy.Config
	for i := range 19 {
		cfg.Rules = append(cfg.Rules, policy.Rule{Deny: fmt.Sprintf(`mcp.tool == "b3__blocked_%d" && !("admin" in principal.scopes)`, i)})
	}
	cfg.Rules = append(cfg.Rules, policy.Rule{Allow: `mcp.backend == "b3" && "tools" in principal.scopes`})
	e, err := policy.New(cfg, policy.Options{Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	p := &policer{}
	return &listBench{cat: cat, e: e, p: p, sub: p.subjectOf(&auth.Principal{Subject: "svc", Scopes: []string{"tools"}}),
		buf: make([]byte, 0, 64<<10)}
}

// listAll lists every tool page by page as a client does, under e (nil: no policy),
// and returns how many it got.
func (lb *listBench) listAll(b *testing.B, e *policy.Engine) int {
	var visible func(bi, i int) bool
	if e != nil {
		visible = lb.p.visible(e, lb.sub, lb.cat, kTools)
	}
	n := 0
	var cursor []byte
	for range 100 {
		res, err := lb.cat.page(lb.buf[:0], kTools, cursor, 100, visible)
		if err != nil {
			b.Fatal(err)
		}
		n += bytes.Count(res, []byte(`{"name":`))
		i := bytes.LastIndex(res, []byte(`"nextCursor":"`))
		if i < 0 {
			return n
		}
		cursor = append(cursor[:0], res[i+len(`"nextCursor":"`):]...)
		cursor = cursor[:bytes.IndexByte(cursor, '"')]
	}
	b.Fatal("more than 100 pages")
	return 0
}
