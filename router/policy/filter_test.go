package policy

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/mcprouter/mcprouter/transport/auth"
)

func TestVisible(t *testing.T) {
	issue := mustEngine(t, Config{Rules: issueRules})
	args := mustEngine(t, Config{Rules: []Rule{
		{Allow: `mcp.tool == "calc" && mcp.arguments.n < 10`},
		{Allow: `mcp.prompt == "p"`},
		{Deny: `mcp.tool == "rm" && mcp.arguments.force == true`},
		{Allow: `mcp.tool == "rm"`},
		{Deny: `mcp.tool == "gone"`},
		{Allow: `mcp.tool == "gone" && mcp.arguments.x == 1`},
	}})
	uris := mustEngine(t, Config{Rules: []Rule{
		{Allow: `mcp.uri.startsWith("pub:")`},
		{Deny: `mcp.backend == "secret"`},
	}})
	none := mustEngine(t, Config{})
	for _, tc := range []struct {
		name string
		e    *Engine
		s    *Subject
		it   Item
		want bool
	}{
		{"alice sees all", issue, alice, Item{ItemTool, "ref__echo", "ref"}, true},
		{"alice does not see the denied", issue, alice, Item{ItemTool, "ref__fail", "ref"}, false},
		{"admin sees it", issue, admin, Item{ItemTool, "ref__fail", "ref"}, true},
		{"bob sees echo", issue, bob, Item{ItemTool, "ref__echo", "ref"}, true},
		{"bob not add", issue, bob, Item{ItemTool, "ref__add", "ref"}, false},
		{"carol nothing", issue, carol, Item{ItemTool, "ref__echo", "ref"}, false},
		{"carol no prompt", issue, carol, Item{ItemPrompt, "p", "ref"}, false},
		{"alice prompt", issue, alice, Item{ItemPrompt, "p", "ref"}, true},
		{"no rules", none, carol, Item{ItemTool, "x", "b"}, true},

		// Rules over the arguments: an allow that may match shows the item, a deny
		// that may not match does not hide it, a deny that matches whatever the
		// arguments hides it.
		{"allow over arguments", args, carol, Item{ItemTool, "calc", "b"}, true},
		{"no allow at all", args, carol, Item{ItemTool, "other", "b"}, false},
		{"deny over arguments", args, carol, Item{ItemTool, "rm", "b"}, true},
		{"deny whatever the arguments", args, carol, Item{ItemTool, "gone", "b"}, false},
		{"prompt", args, carol, Item{ItemPrompt, "p", "b"}, true},

		{"resource", uris, carol, Item{ItemResource, "pub:/a", "b"}, true},
		{"other resource", uris, carol, Item{ItemResource, "priv:/a", "b"}, false},
		{"template may expand to an allowed URI", uris, carol, Item{ItemTemplate, "priv:/{x}", "b"}, true},
		{"template of a denied backend", uris, carol, Item{ItemTemplate, "pub:/{x}", "secret"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for range 2 { // computed, then cached
				if got := tc.e.Visible(tc.s, tc.it); got != tc.want {
					t.Fatalf("visible %v, want %v", got, tc.want)
				}
			}
		})
	}
	if st := issue.Stats(); st.ViewHits == 0 || st.ViewMisses == 0 {
		t.Errorf("cache counters: %+v", st)
	}
}

// A list shows an item exactly when a call to it would be allowed, for rules that do
// not read the arguments: checked over every combination of principals, tools and
// backends of a policy.
func TestVisibleMatchesDecide(t *testing.T) {
	e := mustEngine(t, Config{Rules: []Rule{
		{Allow: `principal.sub == "alice"`},
		{Allow: `"ops" in principal.scopes && mcp.backend == "b1"`},
		{Allow: `mcp.tool.endsWith("__read")`},
		{Deny: `mcp.tool.startsWith("b2__") && principal.sub != "root"`},
		{Deny: `has(principal.claims.blocked) && principal.claims.blocked == true`},
	}})
	subjects := []*Subject{
		alice, carol, NewSubject(&auth.Principal{Subject: "root"}),
		NewSubject(&auth.Principal{Subject: "o", Scopes: []string{"ops"}}),
		NewSubject(&auth.Principal{Subject: "alice", Claims: map[string]any{"blocked": true}}),
	}
	var allowed, denied int
	for _, s := range subjects {
		for _, backend := range []string{"b1", "b2"} {
			for _, tool := range []string{"read", "write"} {
				name := backend + "__" + tool
				in := mustInput(t, call(name, `{"a":1}`))
				in.Backend = backend
				d := e.Decide(s, in)
				if v := e.Visible(s, Item{ItemTool, name, backend}); v != d.Allowed {
					t.Errorf("%s %s: visible %v, call allowed %v (%v)", s.ID(), name, v, d.Allowed, d.Reason)
				}
				if d.Allowed {
					allowed++
				} else {
					denied++
				}
			}
		}
	}
	if allowed < 5 || denied < 5 {
		t.Errorf("%d allowed, %d denied: the policy does not tell them apart", allowed, denied)
	}
}

// The digest changes exactly when the view does.
func TestDigest(t *testing.T) {
	items := []Item{{ItemTool, "a__x", "a"}, {ItemTool, "a__y", "a"}, {ItemTool, "b__x", "b"}}
	v1 := mustEngine(t, Config{Rules: []Rule{{Allow: `principal.sub == "alice" || mcp.backend == "a"`}}})
	v2 := mustEngine(t, Config{Rules: []Rule{{Allow: `principal.sub == "alice" || mcp.tool == "a__x"`}}})

	d := func(e *Engine, s *Subject, items []Item) uint64 { return e.Digest(s, items) }
	// Policy change: alice sees the same, carol loses a__y.
	if d(v1, alice, items) != d(v2, alice, items) {
		t.Error("alice's view did not change, her digest did")
	}
	if d(v1, carol, items) == d(v2, carol, items) {
		t.Error("carol's view changed, her digest did not")
	}
	// Catalog change: a tool carol cannot see changes nothing for her.
	more := append(append([]Item(nil), items...), Item{ItemTool, "b__z", "b"})
	if d(v1, carol, items) != d(v1, carol, more) {
		t.Error("an invisible tool changed carol's digest")
	}
	if d(v1, alice, items) == d(v1, alice, more) {
		t.Error("a visible tool did not change alice's digest")
	}
	// Order does not matter; the same names under other kinds or backends do.
	rev := []Item{items[2], items[0], items[1]}
	if d(v1, alice, items) != d(v1, alice, rev) {
		t.Error("order changed the digest")
	}
	if d(v1, alice, []Item{{ItemTool, "x", "a"}}) == d(v1, alice, []Item{{ItemPrompt, "x", "a"}}) {
		t.Error("kind not in the digest")
	}
	if d(v1, alice, nil) == d(v1, alice, []Item{{ItemTool, "", ""}}) {
		t.Error("an item that hashes to anything still counts")
	}
}

// Claims count in a principal's view only when a rule reads them: tokens that differ
// in iat share one view otherwise.
func TestViewKey(t *testing.T) {
	p1 := NewSubject(&auth.Principal{Subject: "a", Claims: map[string]any{"iat": 1.0}})
	p2 := NewSubject(&auth.Principal{Subject: "a", Claims: map[string]any{"iat": 2.0}})
	p3 := NewSubject(&auth.Principal{Subject: "a", Scopes: []string{"x"}, Claims: map[string]any{"iat": 2.0}})
	p4 := NewSubject(&auth.Principal{Subject: "a", Scopes: []string{"x"}, Claims: map[string]any{"iat": 2.0}})
	if p1.view(0) != p2.view(0) || p1.view(useClaims) == p2.view(useClaims) {
		t.Error("claims in the view key when no rule reads them, or not when one does")
	}
	if p2.view(0) == p3.view(0) || p3.view(useClaims) != p4.view(useClaims) {
		t.Error("view key does not follow the scopes, or is not deterministic")
	}
	if Anonymous.ID() != "" || NewSubject(&auth.Principal{Subject: "s", Issuer: "i"}).ID() != "i s" {
		t.Error("ids")
	}
}

func TestSubjectMemo(t *testing.T) {
	var m SubjectMemo
	p1 := &auth.Principal{Subject: "a"}
	p2 := &auth.Principal{Subject: "a", Scopes: []string{"x"}}
	s1 := m.Get(p1)
	if m.Get(p1) != s1 {
		t.Error("made again for the same principal")
	}
	if s2 := m.Get(p2); s2 == s1 || s2.view(0) == s1.view(0) {
		t.Error("a new token's principal kept the old subject")
	}
	if m.Get(nil).ID() != "" {
		t.Error("nil principal")
	}
}

// The cache stays within its bound: least recently used views go first.
func TestViewCacheBound(t *testing.T) {
	e := mustEngine(t, Config{ViewCache: 100, Rules: []Rule{{Allow: `mcp.tool.size() % 2 == 0`}}})
	var subjects []*Subject
	for i := range 20 {
		subjects = append(subjects, NewSubject(&auth.Principal{Subject: fmt.Sprint("p", i)}))
	}
	for round := range 3 {
		for _, s := range subjects {
			for j := range 30 {
				name := fmt.Sprint("tool", j)
				if got := e.Visible(s, Item{ItemTool, name, "b"}); got != (len(name)%2 == 0) {
					t.Fatalf("round %d: wrong visibility", round)
				}
			}
			if n := e.views.entries.Load(); n > 100 {
				t.Fatalf("%d entries cached, bound 100", n)
			}
		}
	}
	e.views.mu.Lock()
	nviews := len(e.views.views)
	e.views.mu.Unlock()
	if nviews > 4 {
		t.Errorf("%d views kept with 30 items each and a bound of 100", nviews)
	}
}

// Concurrent list filtering (run with -race).
func TestVisibleConcurrent(t *testing.T) {
	e := mustEngine(t, Config{ViewCache: 500, Rules: issueRules})
	subjects := []*Subject{alice, bob, carol, admin}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 2000 {
				s := subjects[(g+i)%len(subjects)]
				name := fmt.Sprint("ref__", i%300)
				if e.Visible(s, Item{ItemTool, name, "ref"}) != (s == alice || s == admin) {
					t.Error("wrong visibility")
					return
				}
			}
		})
	}
	wg.Wait()
}

// Mask agrees with Visible, is reused for the same gen, and is made afresh for another.
func TestMask(t *testing.T) {
	e := mustEngine(t, Config{ViewCache: 1000, Rules: []Rule{{Allow: `mcp.backend == "b1"`}}})
	var items []Item
	for i := range 150 {
		items = append(items, Item{ItemTool, fmt.Sprint("t", i), fmt.Sprint("b", i%3)})
	}
	w := e.View(carol)
	m := w.Mask(7, items)
	for i, it := range items {
		if got := m[i/64]&(1<<(i%64)) != 0; got != e.Visible(carol, it) {
			t.Fatalf("item %d: mask %v", i, got)
		}
	}
	if m2 := e.View(carol).Mask(7, items); &m2[0] != &m[0] {
		t.Error("mask of the same gen made again")
	}
	fewer := items[:100]
	if m3 := w.Mask(8, fewer); len(m3) != 2 || &m3[0] == &m[0] {
		t.Error("another gen got the old mask")
	}
	if none := mustEngine(t, Config{}).View(carol).Mask(1, items); none[2] != 1<<22-1 || none[0] != ^uint64(0) {
		t.Errorf("unfiltered mask %x", none)
	}
	// Masks count in the cache's bound, and go with their view.
	for i := range 20 {
		s := NewSubject(&auth.Principal{Subject: fmt.Sprint("s", i)})
		for g := range 10 {
			e.View(s).Mask(uint64(g), items)
		}
		if n := e.views.entries.Load(); n > 1000 {
			t.Fatalf("%d entries, bound 1000", n)
		}
	}
}

// A cached decision is the decision the rules make; a failing rule is reported on
// every call (failures are not cached).
func TestDecisionCache(t *testing.T) {
	var logs bytes.Buffer
	e, err := New(Config{Rules: append(issueRules[:3:3], Rule{Name: "lvl", Deny: `principal.claims.level > 5`})},
		Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	fresh := mustEngine(t, Config{Rules: append(issueRules[:3:3], Rule{Name: "lvl", Deny: `principal.claims.level > 5`})})
	for range 3 {
		for _, s := range []*Subject{bob, NewSubject(&auth.Principal{Subject: "alice", Claims: map[string]any{"level": 1.0}})} {
			for _, tool := range []string{"ref__echo", "ref__fail", "x"} {
				in := mustInput(t, call(tool, ""))
				got := e.Decide(s, in)
				in.subj = s
				every := make(plan, len(fresh.c.rules)) // every rule evaluated
				for i := range every {
					every[i] = isUnknown
				}
				want := fresh.decide(in, every)
				if got.Allowed != want.Allowed || got.Reason != want.Reason || got.Name != want.Name {
					t.Fatalf("%s %s: cached %+v, rules %+v", s.ID(), tool, got, want)
				}
			}
		}
		// carol has no level claim: the deny rule fails, every time.
		if d := e.Decide(carol, mustInput(t, call("x", ""))); d.Reason != ReasonError {
			t.Fatalf("carol: %+v", d)
		}
	}
	if n := strings.Count(logs.String(), "rule=lvl"); n != 3 {
		t.Errorf("failing rule reported %d times in 3 calls", n)
	}
}
