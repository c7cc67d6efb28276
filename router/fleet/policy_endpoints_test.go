package fleet

import (
	"testing"

	"github.com/mcprouter/mcprouter/router/modern"
	"github.com/mcprouter/mcprouter/router/policy"
	"github.com/mcprouter/mcprouter/transport/auth"
)

// TestEngineForEndpoint: a principal is decided by its endpoint's engine; one whose
// endpoint is gone by an engine that denies everything; and a 2026-07-28 list is private
// as soon as some engine filters.
func TestEngineForEndpoint(t *testing.T) {
	main := openEngine()
	team, err := policy.New(policy.Config{}, policy.Options{Logger: quiet, Scope: policy.Scope{Include: []string{"a__*"}}})
	if err != nil {
		t.Fatal(err)
	}
	es := &engines{main: main, by: map[string]*policy.Engine{"team": team}}
	for _, c := range []struct {
		pr   *auth.Principal
		want *policy.Engine
	}{
		{nil, main},
		{&auth.Principal{Subject: "alice"}, main},
		{&auth.Principal{Subject: "alice", Endpoint: "team"}, team},
		{&auth.Principal{Subject: "alice", Endpoint: "gone"}, closedEngine()},
	} {
		if got := es.engineFor(c.pr); got != c.want {
			t.Errorf("engineFor(%v) is not the endpoint's engine", c.pr)
		}
	}
	in := policy.Input{Method: policy.MethodToolsCall, Tool: "a__echo", Backend: "a"}
	if d := closedEngine().Decide(policy.Anonymous, &in); d.Allowed {
		t.Fatal("the engine of a removed endpoint allowed a call")
	}

	var p *policer
	public := modern.Cache{TTLms: 5, Scope: modern.ScopePublic}
	if p.privateCache(public) != public {
		t.Fatal("no policer: the list's own cache fields change")
	}
	p = &policer{}
	p.eng.Store(&engines{main: main})
	if p.privateCache(public) != public {
		t.Fatal("no engine filters: the list's own cache fields change")
	}
	p.eng.Store(es)
	if got := p.privateCache(public); got.Scope != modern.ScopePrivate || got.TTLms != 5 {
		t.Fatalf("a filtered list's cache fields %+v, want private", got)
	}
}
