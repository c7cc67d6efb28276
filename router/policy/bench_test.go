package policy

import (
	"fmt"
	"testing"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/transport/auth"
)

// rules20 is a 20-rule policy of the kind operators write: 5 deny rules that do not
// match the benchmark's call, then 15 allow rules of which only the last matches (the
// longest path through the rules).
func rules20() []Rule {
	var rules []Rule
	for i := range 5 {
		rules = append(rules, Rule{Deny: fmt.Sprintf(`mcp.tool == "blocked%d" && !("admin" in principal.scopes)`, i)})
	}
	for i := range 14 {
		rules = append(rules, Rule{Allow: fmt.Sprintf(`principal.sub == "user%d" || (mcp.backend == "b%d" && "team%d" in principal.scopes)`, i, i, i)})
	}
	return append(rules, Rule{Allow: `mcp.tool.startsWith("ref__") && "tools" in principal.scopes`})
}

var benchCall = []byte(`{"jsonrpc":"2.0","id":17,"method":"tools/call","params":{"name":"ref__echo","arguments":{"text":"hello","n":3},"_meta":{"progressToken":"p1"}}}`)

// BenchmarkDecide: one request through 20 rules, from the router's scanned message
// (FromMessage + Decide), as the dispatch path would run it.
func BenchmarkDecide(b *testing.B) {
	s := NewSubject(&auth.Principal{Subject: "svc", Scopes: []string{"tools", "read"}})
	for _, bc := range []struct {
		name  string
		rules []Rule
	}{
		{"rules=20", rules20()},
		{"rules=20+arguments", append(rules20()[:19:19], Rule{Allow: `mcp.tool.startsWith("ref__") && mcp.arguments.n < 10`})},
		{"rules=1", []Rule{{Allow: `"tools" in principal.scopes`}}},
		{"rules=0", nil},
	} {
		b.Run(bc.name, func(b *testing.B) {
			e := mustEngine(b, Config{Rules: bc.rules})
			var m codec.Message
			if err := codec.Scan(benchCall, &m); err != nil {
				b.Fatal(err)
			}
			var in Input
			b.ReportAllocs()
			b.SetBytes(int64(len(benchCall)))
			for b.Loop() {
				if err := in.FromMessage(&m); err != nil {
					b.Fatal(err)
				}
				in.Backend = "ref"
				if d := e.Decide(s, &in); !d.Allowed {
					b.Fatalf("denied: %+v", d)
				}
			}
		})
	}
}

// BenchmarkDecideUncached: the same 20 rules all evaluated (the first call of a
// principal to a tool, before its plan is cached).
func BenchmarkDecideUncached(b *testing.B) {
	s := NewSubject(&auth.Principal{Subject: "svc", Scopes: []string{"tools", "read"}})
	e := mustEngine(b, Config{Rules: rules20()})
	every := make(plan, len(e.c.rules))
	for i := range every {
		every[i] = isUnknown
	}
	var m codec.Message
	if err := codec.Scan(benchCall, &m); err != nil {
		b.Fatal(err)
	}
	var in Input
	b.ReportAllocs()
	for b.Loop() {
		if err := in.FromMessage(&m); err != nil {
			b.Fatal(err)
		}
		in.Backend, in.subj = "ref", s
		if d := e.decide(&in, every); !d.Allowed {
			b.Fatalf("denied: %+v", d)
		}
	}
}

// BenchmarkParseInput: the CEL input from raw bytes (the codec's scan included).
func BenchmarkParseInput(b *testing.B) {
	var in Input
	b.ReportAllocs()
	b.SetBytes(int64(len(benchCall)))
	for b.Loop() {
		if err := ParseInput(benchCall, &in); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkList: a tools/list of 1,000 tools for a principal allowed 10% of them, with
// the filter's cache warm (every list after the first), cold (the first list after a
// reload or for a new principal), and the same list unfiltered (no policy).
func BenchmarkList(b *testing.B) {
	items := make([]Item, 1000)
	for i := range items {
		items[i] = Item{Kind: ItemTool, Name: fmt.Sprintf("b%d__tool%03d", i%10, i), Backend: fmt.Sprintf("b%d", i%10)}
	}
	rules := append(rules20()[:19:19], Rule{Allow: `mcp.backend == "b3" && "tools" in principal.scopes`})
	s := NewSubject(&auth.Principal{Subject: "svc", Scopes: []string{"tools"}})
	list := func(b *testing.B, e *Engine, dst []Item) []Item {
		dst = dst[:0]
		if e == nil {
			return append(dst, items...)
		}
		w := e.View(s)
		for _, it := range items {
			if w.Visible(it) {
				dst = append(dst, it)
			}
		}
		return dst
	}
	dst := make([]Item, 0, len(items))
	// listed benchmarks the list under e (nil: no policy), whose cache the first list
	// warms, and checks it keeps want items.
	listed := func(name string, e *Engine, want int) {
		b.Run(name, func(b *testing.B) {
			list(b, e, dst)
			b.ReportAllocs()
			for b.Loop() {
				if dst = list(b, e, dst); len(dst) != want {
					b.Fatal(len(dst))
				}
			}
		})
	}
	listed("unfiltered", nil, 1000)
	listed("filtered-warm", mustEngine(b, Config{Rules: rules}), 100)
	b.Run("filtered-mask", func(b *testing.B) {
		e := mustEngine(b, Config{Rules: rules})
		e.View(s).Mask(1, items)
		b.ReportAllocs()
		for b.Loop() {
			m := e.View(s).Mask(1, items)
			dst = dst[:0]
			for i, it := range items {
				if m[i/64]&(1<<(i%64)) != 0 {
					dst = append(dst, it)
				}
			}
			if len(dst) != 100 {
				b.Fatal(len(dst))
			}
		}
	})
	b.Run("filtered-cold", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			b.StopTimer()
			e := mustEngine(b, Config{Rules: rules})
			b.StartTimer()
			if dst = list(b, e, dst); len(dst) != 100 {
				b.Fatal(len(dst))
			}
		}
	})
	b.Run("digest-warm", func(b *testing.B) {
		e := mustEngine(b, Config{Rules: rules})
		e.Digest(s, items)
		b.ReportAllocs()
		for b.Loop() {
			e.Digest(s, items)
		}
	})
}

// BenchmarkTake: the rate-limit check of one request (admitted), with one limit keyed
// by principal, and with three limits (one of them matched by CEL, one composite key).
func BenchmarkTake(b *testing.B) {
	s := NewSubject(&auth.Principal{Subject: "svc"})
	for _, bc := range []struct {
		name   string
		limits []Limit
	}{
		{"limits=1", []Limit{{Name: "p", Key: KeyParts{KeyPrincipal}, Rate: 1e12, Burst: 1 << 30}}},
		{"limits=3", []Limit{
			{Name: "p", Key: KeyParts{KeyPrincipal}, Rate: 1e12, Burst: 1 << 30},
			{Name: "t", Match: `mcp.method == "tools/call"`, Key: KeyParts{KeyPrincipal, KeyTool}, Rate: 1e12, Burst: 1 << 30},
			{Name: "b", Key: KeyParts{KeyBackend}, Rate: 1e12, Burst: 1 << 30},
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			e := mustEngine(b, Config{Limits: bc.limits})
			in := mustInput(b, string(benchCall))
			in.Backend = "ref"
			b.ReportAllocs()
			for b.Loop() {
				if !e.Take(s, in).Allowed {
					b.Fatal("limited")
				}
			}
		})
		b.Run(bc.name+"/parallel", func(b *testing.B) {
			e := mustEngine(b, Config{Limits: bc.limits})
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				in := mustInput(b, string(benchCall))
				in.Backend = "ref"
				for pb.Next() {
					if !e.Take(s, in).Allowed {
						b.Error("limited")
						return
					}
				}
			})
		})
	}
}
