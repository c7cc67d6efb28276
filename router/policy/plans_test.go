package policy

import (
	"strconv"
	"testing"
	"unsafe"
)

// TestPlanMap: every plan stored is found, first under the lock and, once the newer
// entries have cost enough locked lookups, without it; a key's strings are copied.
func TestPlanMap(t *testing.T) {
	v := &view{plans: newPlanMap()}
	c := newViewCache(1 << 20)
	keys := make([]callKey, 100)
	for i := range keys {
		name := []byte("tool" + strconv.Itoa(i))
		keys[i] = callKey{method: MethodToolsCall, tool: string(name), backend: "b"}
		if v.plan(&keys[i]) != nil {
			t.Fatalf("key %d found before it was stored", i)
		}
		c.storePlan(v, &keys[i], &planned{fixed: true, d: Decision{Rule: i}})
	}
	if got := c.entries.Load(); got != 100 {
		t.Fatalf("%d entries counted, want 100", got)
	}
	for round := range 3 {
		for i := range keys {
			if p := v.plan(&keys[i]); p == nil || p.d.Rule != i {
				t.Fatalf("round %d: key %d gives %+v", round, i, p)
			}
		}
	}
	for i := range keys {
		if v.plans.load(&keys[i]) == nil {
			t.Fatalf("key %d not promoted to the lock-free snapshot after three rounds of lookups", i)
		}
	}
	c.storePlan(v, &keys[0], &planned{d: Decision{Rule: -7}}) // already there: kept
	if p := v.plan(&keys[0]); p.d.Rule != 0 {
		t.Fatalf("a second store replaced the plan: %+v", p)
	}
	v.plans.clear()
	if v.plan(&keys[3]) != nil || v.plans.len() != 0 {
		t.Fatal("plans left after clear")
	}
}

// TestCallKeyClone: a plan's key owns its strings, whatever the call's point into.
func TestCallKeyClone(t *testing.T) {
	req := []byte("tools/callechob")
	k := callKey{method: string(req[:10]), tool: string(req[10:14]), backend: string(req[14:])}
	c := k.clone()
	if c != k {
		t.Fatalf("clone %+v of %+v", c, k)
	}
	only := callKey{tool: "x"}
	if c := only.clone(); c != only || unsafe.StringData(c.tool) == unsafe.StringData(only.tool) {
		t.Fatal("a key of one string shares it")
	}
}
