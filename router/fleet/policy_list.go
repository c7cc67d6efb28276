package fleet

import (
	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/router"
	"github.com/mcprouter/mcprouter/router/policy"
	"github.com/mcprouter/mcprouter/transport"
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
	pi := &policyItems{cat: cat}
	for k := kind(0); k < numKinds; k++ {
		pi.base[k] = make([]int, len(cat.lists[k]))
		for bi, list := range cat.lists[k] {
			pi.base[k][bi] = len(pi.items[k])
			name := ""
			if bi < len(p.backends) {
				name = p.backends[bi].cfg.Name
			}
			for _, it := range list {
				pi.items[k] = append(pi.items[k], policy.Item{Kind: itemKinds[k], Name: it.key, Backend: name})
			}
		}
	}
	p.lists.Store(pi)
	return pi
}

// list answers x when it is a */list and the policy filters lists; false leaves it to
// routing (no policy, no rules, or not a list).
func (p *policer) list(rt *routing, s *router.Session, x *transport.Exchange, cat *catalog) bool {
	k, ok := kindOfList(x.Msg.Method)
	if !ok {
		return false
	}
	e := p.eng.Load()
	if e == nil || !e.Filtering() {
		return false
	}
	pi := p.itemsOf(cat)
	mask := e.View(p.subject(s, x)).Mask(cat.gen*uint64(numKinds)+uint64(k)+1, pi.items[k])
	visible := func(bi, i int) bool {
		n := pi.base[k][bi] + i
		return mask[n/64]&(1<<(n%64)) != 0
	}
	cursor := x.Msg.Cursor
	if x.Msg.Flags&codec.CursorEscaped != 0 {
		cursor, _ = codec.Unquote(nil, cursor)
	}
	bp := getBuf()
	res, err := cat.filteredPage((*bp)[:0], k, cursor, rt.pageSize, visible)
	if err != nil {
		putBuf(bp)
		rt.rep.replyErr(x, codec.CodeInvalidParams, "Invalid params: invalid cursor")
		return true
	}
	*bp = res
	rt.rep.reply(x, res)
	putBuf(bp)
	return true
}

// filteredPage is page for the items visible says are shown: size of them per page,
// and a next cursor only when some shown item remains.
func (cat *catalog) filteredPage(dst []byte, k kind, cursor []byte, size int, visible func(bi, i int) bool) ([]byte, error) {
	pos := make([]int, len(cat.lists[k]))
	if len(cursor) > 0 {
		if err := decodeCursor(cursor, pos); err != nil {
			return dst, err
		}
	}
	dst = append(dst, `{"`...)
	dst = append(dst, kindInfo[k].list...)
	dst = append(dst, `":[`...)
	n := 0
	more := false
	for bi := range pos {
		list := cat.lists[k][bi]
		for pos[bi] < len(list) {
			if !visible(bi, pos[bi]) {
				pos[bi]++
				continue
			}
			if n == size {
				more = true
				break
			}
			if n > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, list[pos[bi]].raw...)
			pos[bi]++
			n++
		}
	}
	dst = append(dst, ']')
	if more {
		dst = append(dst, `,"nextCursor":"`...)
		dst = appendCursor(dst, pos)
		dst = append(dst, '"')
	}
	return append(dst, '}'), nil
}
