package fleet

import (
	"encoding/json"
	"io"
	"log/slog"
	"slices"
	"testing"

	"github.com/mcprouter/mcprouter/router/policy"
	"github.com/mcprouter/mcprouter/transport/auth"
)

// toolsCatalog is a catalog snapshot whose one backend (a) lists names as tools.
func toolsCatalog(gen uint64, names ...string) *catalog {
	cat := &catalog{gen: gen, backends: []*backend{{cfg: BackendConfig{Name: "a"}}}}
	var list []item
	for _, n := range names {
		list = append(list, item{key: n, raw: []byte(`{"name":"` + n + `"}`)})
	}
	for k := kind(0); k < numKinds; k++ {
		cat.lists[k] = [][]item{nil}
	}
	cat.lists[kTools][0] = list
	return cat
}

func testPolicer(t *testing.T) *policer {
	t.Helper()
	e, err := policy.New(policy.Config{Rules: []policy.Rule{
		{Allow: `principal.sub == "alice"`},
		{Allow: `principal.sub == "bob" && mcp.tool.startsWith("a__echo")`},
	}}, policy.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	p := &policer{}
	p.eng.Store(&engines{main: e})
	return p
}

// TestPolicyListChanged: a change to the tools list reaches the principals whose view
// changed only; with nothing notified before, everyone gets it; another list's
// notification compares that list.
func TestPolicyListChanged(t *testing.T) {
	p := testPolicer(t)
	alice := &auth.Principal{Subject: "alice"}
	bob := &auth.Principal{Subject: "bob"}
	const toolsChanged = "notifications/tools/list_changed"

	if p.viewChange(toolsChanged, toolsCatalog(1, "a__echo", "a__x")) != nil {
		t.Fatal("first notification filtered, want it sent to everyone (nothing to compare with)")
	}
	changed := p.viewChange(toolsChanged, toolsCatalog(2, "a__echo", "a__y"))
	if changed == nil || !changed(alice) || changed(bob) {
		t.Fatalf("a__x replaced by a__y: want alice told and bob not")
	}
	changed = p.viewChange(toolsChanged, toolsCatalog(3, "a__echo", "a__echo2", "a__y"))
	if changed == nil || !changed(alice) || !changed(bob) {
		t.Fatalf("a__echo2 added: want alice and bob told")
	}
	changed = p.viewChange("notifications/prompts/list_changed", toolsCatalog(4, "a__echo", "a__z"))
	if changed != nil && (changed(alice) || changed(bob)) {
		t.Fatalf("prompts unchanged: want nobody told")
	}
}

// TestPolicyFilteredPage: the filtered pages of a list reach every visible item, size
// at a time, and end with the last visible one (no empty page behind hidden items).
func TestPolicyFilteredPage(t *testing.T) {
	cat := toolsCatalog(1)
	cat.lists[kTools] = [][]item{
		{{key: "a1", raw: []byte(`"a1"`)}, {key: "a2", raw: []byte(`"a2"`)}, {key: "a3", raw: []byte(`"a3"`)}},
		{{key: "b1", raw: []byte(`"b1"`)}, {key: "b2", raw: []byte(`"b2"`)}},
	}
	hidden := map[string]bool{"a2": true, "b2": true}
	visible := func(bi, i int) bool { return !hidden[cat.lists[kTools][bi][i].key] }
	var got []string
	cursor := []byte(nil)
	for range 10 {
		res, err := cat.page(nil, kTools, cursor, 2, visible)
		if err != nil {
			t.Fatal(err)
		}
		var page struct {
			Tools      []string `json:"tools"`
			NextCursor string   `json:"nextCursor"`
		}
		if err := json.Unmarshal(res, &page); err != nil {
			t.Fatalf("%s: %v", res, err)
		}
		if len(page.Tools) == 0 {
			t.Fatalf("empty page %s", res)
		}
		got = append(got, page.Tools...)
		if page.NextCursor == "" {
			break
		}
		cursor = []byte(page.NextCursor)
	}
	if want := []string{"a1", "a3", "b1"}; !slices.Equal(got, want) {
		t.Fatalf("pages gave %v, want %v", got, want)
	}
}
