package fleet

import (
	"sync"
	"sync/atomic"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/router/modern"
	"github.com/mcprouter/mcprouter/transport"
)

// toolHeaders checks a 2026-07-28 client's Mcp-Param-* headers against the tool it
// calls (modern.CheckParamHeaders): the router processes the body, so the revision asks
// it to, and a 2025 backend would not. The declarations (x-mcp-header in the tool's
// inputSchema) are read once per tool and catalog snapshot, on first use, so a call of
// a tool without any costs a map lookup.
type toolHeaders struct {
	cur atomic.Pointer[headerCache]
}

// headerCache holds the declarations of one catalog snapshot's tools, by exposed name.
type headerCache struct {
	gen uint64
	m   sync.Map // string → []modern.ParamHeader
}

// check judges the stateless tools/call x of tool name (exposed), routed to b by cat;
// a rejection is answered by the caller.
//
// name is the request's bytes: made a string only to be stored, on a tool's first call
// in a snapshot, so that the lookup of every other call allocates nothing.
func (th *toolHeaders) check(cat *catalog, name []byte, b *backend, x *transport.Exchange) modern.Reject {
	c := th.cur.Load()
	if c == nil || c.gen != cat.gen {
		c = &headerCache{gen: cat.gen}
		th.cur.Store(c)
	}
	var decls []modern.ParamHeader
	if v, ok := c.m.Load(string(name)); ok {
		decls = v.([]modern.ParamHeader)
	} else {
		key := string(name)
		decls = modern.ParamHeaders(cat.toolRaw(key, b))
		c.m.Store(key, decls)
	}
	if len(decls) == 0 {
		return modern.Reject{}
	}
	return modern.CheckParamHeaders(decls, codec.Member(x.Msg.Params, "arguments"), x.Headers.Params)
}

// toolRaw returns the tool object cat lists under exposed name for b; nil when none.
func (cat *catalog) toolRaw(name string, b *backend) []byte {
	for bi, cb := range cat.backends {
		if cb != b {
			continue
		}
		for _, it := range cat.lists[kTools][bi] {
			if it.key == name {
				return it.raw
			}
		}
	}
	return nil
}
