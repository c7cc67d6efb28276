package fleet

import (
	"encoding/json"

	"github.com/bytedance/sonic"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/router"
	"github.com/mcprouter/mcprouter/router/modern"
	"github.com/mcprouter/mcprouter/transport"
)

// routing is the part that answers, in Prepare, what the fleet answers from its catalog
// (merged lists, unknown names, bad cursors) and routes the rest by name or URI to a
// backend: the request is recorded with the forwarder (track) before Run, so that a
// cancellation that follows always finds it; resources/subscribe goes to the
// subscriber. It runs in each session's order on the dispatcher, never blocks and does
// no I/O; it reads the catalog's current snapshot without a lock.
type routing struct {
	catalog  *catalogBuilder
	fwd      *forwarder
	subs     subscriber
	rep      *reporter
	pageSize int      // Config.PageSize
	pol      *policer // nil without a policy (policy.go)
	park     *parking // a stateless client's retry with requestState (mrtr.go)
}

// request answers or routes a client's request; true sends it to Run.
func (rt *routing) request(s *router.Session, x *transport.Exchange) bool {
	m := &x.Msg
	// A retry carries a requestState member, which Scan saw (StateMember): every
	// other stateless request is spared a search of its params for one.
	if x.Stateless && rt.park != nil && m.Flags&codec.StateMember != 0 {
		if st := modern.RequestState(m.Params); ours(st) {
			if run, again := rt.park.resume(s, x, st, rt.rep); !again {
				return run
			} // else x is the original request again (urlelicit.go): routed below
		}
	}
	cat := rt.catalog.load()
	if rt.pol != nil && rt.pol.list(rt, s, x, cat) {
		return false
	}
	var b *backend
	strip := 0
	switch string(m.Method) {
	case "tools/list":
		return rt.list(x, cat, kTools, nil)
	case "prompts/list":
		return rt.list(x, cat, kPrompts, nil)
	case "resources/list":
		return rt.list(x, cat, kResources, nil)
	case "resources/templates/list":
		return rt.list(x, cat, kTemplates, nil)
	case "tools/call", "prompts/get":
		table, what := cat.tools, "tool"
		if string(m.Method) == "prompts/get" {
			table, what = cat.prompts, "prompt"
		}
		name := m.Name
		if m.Flags&codec.NameEscaped != 0 {
			// Rare: a name written with escapes. Decode it for the lookup; forward
			// rewrites the whole name then.
			name, _ = codec.Unquote(nil, m.Name)
		}
		r, ok := table[string(name)]
		if !ok {
			return rt.rep.replyErr(x, codec.CodeInvalidParams, "Unknown "+what+": "+string(name))
		}
		b, strip = r.b, r.strip
		// Only a tool's route has declarations (a prompt's has none).
		if len(r.headers) > 0 && x.Stateless && x.Carrier == transport.CarrierStreamable {
			if rej := checkParamHeaders(r.headers, x); !rej.OK() {
				x.SetStatus(rej.Status)
				return rt.rep.replyErr(x, rej.Code, rej.Message)
			}
		}
	case "resources/read", "resources/subscribe", "resources/unsubscribe":
		if b = cat.resourceOwner(string(m.URI)); b == nil {
			return rt.rep.replyErr(x, codec.CodeResourceNotFound, "Resource not found: "+string(m.URI))
		}
		// A 2026-07-28 backend has no per-client subscription: its one listen
		// stream serves every client.
		if string(m.Method) != "resources/read" && (!b.cfg.PerClient || b.modern()) {
			if rt.pol != nil && !rt.pol.admit(rt.rep, s, x, b) {
				return false
			}
			return rt.subs.handle(s, x, b)
		}
	case "completion/complete":
		return rt.complete(s, x, cat)
	default:
		return rt.rep.replyErr(x, codec.CodeMethodNotFound, modern.MethodNotFound(m.Method)) // with the reason when the method cannot be mapped
	}
	if rt.pol != nil && !rt.pol.admit(rt.rep, s, x, b) {
		return false
	}
	rt.fwd.track(s, x, b, strip)
	return true
}

// list answers a */list request from the merged catalog, showing the items visible
// allows (nil: all).
func (rt *routing) list(x *transport.Exchange, cat *catalog, k kind, visible func(bi, i int) bool) bool {
	cursor := x.Msg.Cursor
	if x.Msg.Flags&codec.CursorEscaped != 0 {
		cursor, _ = codec.Unquote(nil, cursor)
	}
	bp := getBuf()
	res, err := cat.page((*bp)[:0], k, cursor, rt.pageSize, visible)
	if err != nil {
		putBuf(bp)
		return rt.rep.replyErr(x, codec.CodeInvalidParams, "Invalid params: invalid cursor")
	}
	*bp = res
	rt.rep.reply(x, res)
	putBuf(bp)
	return false
}

// complete routes completion/complete by its ref: a prompt by (exposed) name, a
// resource template by URI. The ref is rewritten with a real parse: completion is not a
// hot path, and the name sits two levels deep.
func (rt *routing) complete(s *router.Session, x *transport.Exchange, cat *catalog) bool {
	var p map[string]json.RawMessage
	if err := sonic.Unmarshal(x.Msg.Params, &p); err != nil {
		return rt.rep.replyErr(x, codec.CodeInvalidParams, "Invalid params: completion/complete needs a ref")
	}
	var ref map[string]json.RawMessage
	if err := sonic.Unmarshal(p["ref"], &ref); err != nil {
		return rt.rep.replyErr(x, codec.CodeInvalidParams, "Invalid params: completion/complete needs a ref")
	}
	var typ, name, uri string
	sonic.Unmarshal(ref["type"], &typ)
	sonic.Unmarshal(ref["name"], &name)
	sonic.Unmarshal(ref["uri"], &uri)
	var b *backend
	switch typ {
	case "ref/prompt":
		r, ok := cat.prompts[name]
		if !ok {
			return rt.rep.replyErr(x, codec.CodeInvalidParams, "Unknown prompt: "+name)
		}
		b = r.b
		if r.strip > 0 {
			ref["name"], _ = sonic.Marshal(name[r.strip:])
		}
	case "ref/resource":
		if b = cat.resourceOwner(uri); b == nil {
			return rt.rep.replyErr(x, codec.CodeResourceNotFound, "Resource not found: "+uri)
		}
	default:
		return rt.rep.replyErr(x, codec.CodeInvalidParams, "Invalid params: unknown ref type "+typ)
	}
	if rt.pol != nil && !rt.pol.admit(rt.rep, s, x, b) {
		return false
	}
	p["ref"], _ = sonic.Marshal(ref)
	params, _ := sonic.Marshal(p)
	// The rewritten request replaces the exchange's bytes: x.Raw is the exchange's own
	// copy, so it can be swapped for a new one.
	raw := codec.AppendRequest(nil, x.Msg.ID, "completion/complete", params)
	var m codec.Message
	if err := codec.Scan(raw, &m); err != nil {
		return rt.rep.replyErr(x, codec.CodeInternalError, "cannot rewrite completion request")
	}
	x.Raw, x.Msg = raw, m
	rt.fwd.track(s, x, b, 0)
	return true
}
