package fleet

import (
	"slices"

	"github.com/mcprouter/mcprouter/router"
	"github.com/mcprouter/mcprouter/router/policy"
	"github.com/mcprouter/mcprouter/transport"
	"github.com/mcprouter/mcprouter/transport/auth"
)

// Filtered lists: a */list answered under a policy shows a principal the items a call
// to which the rules would allow (policy.View), paged like the unfiltered list (the
// same cursor, one position per backend) so that paging still reaches every allowed
// item of every backend: hidden items are skipped without counting toward the page.

// policyItems are one catalog snapshot's lists as the policy sees them: per kind, every
// backend's items in one slice (what View.Mask takes), and where each backend's start.
type policyItems struct {
	cat   *catalog
	items [numKinds][]policy.Item
	base  [numKinds][]int
}

var itemKinds = [numKinds]policy.ItemKind{
	kTools: policy.ItemTool, kPrompts: policy.ItemPrompt,
	kResources: policy.ItemResource, kTemplates: policy.ItemTemplate,
}

// itemsOf returns cat's lists as policy items, made once per snapshot.
func (p *policer) itemsOf(cat *catalog) *policyItems {
	if pi := p.lists.Load(); pi != nil && pi.cat == cat {
		return pi
	}
	pi := policyItemsOf(cat)
	p.lists.Store(pi)
	return pi
}

// policyItemsOf makes cat's lists as policy items, each named by its backend.
func policyItemsOf(cat *catalog) *policyItems {
	pi := &policyItems{cat: cat}
	for k := kind(0); k < numKinds; k++ {
		pi.base[k] = make([]int, len(cat.lists[k]))
		for bi, list := range cat.lists[k] {
			pi.base[k][bi] = len(pi.items[k])
			name := ""
			if bi < len(cat.backends) {
				name = cat.backends[bi].cfg.Name
			}
			for _, it := range list {
				pi.items[k] = append(pi.items[k], policy.Item{Kind: itemKinds[k], Name: it.key, Backend: name})
			}
		}
	}
	return pi
}

// list answers x when it is a */list and the policy filters lists; false leaves it to
// routing (no policy, no rules, or not a list).
func (p *policer) list(rt *routing, s *router.Session, x *transport.Exchange, cat *catalog) bool {
	k, ok := kindOfList(x.Msg.Method)
	if !ok {
		return false
	}
	e := p.engine(s, x)
	if e == nil || !e.Filtering() {
		return false
	}
	p.seen[k].CompareAndSwap(nil, cat) // the first view clients saw (changedFor)
	rt.list(x, cat, k, p.visible(e, p.subject(s, x), cat, k))
	return true
}

// visible is what sub may see of cat's list k under e, as catalog.page takes it: item
// i of backend bi's list.
func (p *policer) visible(e *policy.Engine, sub *policy.Subject, cat *catalog, k kind) func(bi, i int) bool {
	pi := p.itemsOf(cat)
	mask := e.View(sub).Mask(cat.gen*uint64(numKinds)+uint64(k)+1, pi.items[k])
	return func(bi, i int) bool {
		n := pi.base[k][bi] + i
		return mask[n/64]&(1<<(n%64)) != 0
	}
}

// changedFor says, for a list_changed notification (method) about catalog cur, which
// sessions are to get it: those whose principal's view of the lists it covers differs
// from the view of the catalog last notified (policy.Engine.Digest, under the engine of
// the principal's endpoint), so that a change to tools a principal cannot use does not
// make its clients list again. A session whose engine does not filter gets it. nil:
// every session (no policy that filters, or nothing known to compare with).
func (p *policer) changedFor(method string, cur *catalog) func(s *router.Session) bool {
	changed := p.viewChange(method, cur)
	if changed == nil {
		return nil
	}
	return func(s *router.Session) bool { return changed(s.Principal()) }
}

// viewChange is changedFor by principal: the verdict is worked out once per principal.
func (p *policer) viewChange(method string, cur *catalog) func(*auth.Principal) bool {
	es := p.eng.Load()
	if es == nil || !es.filtering() || cur == nil {
		return nil
	}
	var kinds []kind
	var prevs []*catalog
	for k := kind(0); k < numKinds; k++ {
		if kindInfo[k].changed == method {
			kinds = append(kinds, k)
			prevs = append(prevs, p.seen[k].Swap(cur))
		}
	}
	if len(kinds) == 0 || slices.Contains(prevs, nil) {
		return nil
	}
	before := make([]*policyItems, len(prevs))
	for i, prev := range prevs {
		before[i] = policyItemsOf(prev)
	}
	now := p.itemsOf(cur)
	verdicts := map[*policy.Subject]bool{} // a Subject is one principal, of one endpoint
	return func(pr *auth.Principal) bool {
		e := es.engineFor(pr)
		if e == nil || !e.Filtering() {
			return true
		}
		sub := p.subjectOf(pr)
		if v, ok := verdicts[sub]; ok {
			return v
		}
		changed := false
		for i, k := range kinds {
			if e.Digest(sub, before[i].items[k]) != e.Digest(sub, now.items[k]) {
				changed = true
				break
			}
		}
		verdicts[sub] = changed
		return changed
	}
}
