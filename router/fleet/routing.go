package fleet

import (
	"encoding/json"

	"github.com/bytedance/sonic"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/router"
	"github.com/mcprouter/mcprouter/transport"
)

// Routing: Prepare, called by the router in each session's order, answers what the fleet
// answers itself (merged lists, unknown names, bad cursors) and routes the rest by name or
// URI to a backend, recording the request in the in-flight table (track) before Run; it
// never blocks and does no I/O.

// Prepare implements router.Fleet. It runs in the session's order: requests are routed
// and recorded in the in-flight table here, so that a cancellation that follows always
// finds them; the I/O happens in Run.
func (f *Fleet) Prepare(s *router.Session, x *transport.Exchange) bool {
	m := &x.Msg
	switch m.Kind {
	case codec.KindNotification:
		return f.notices.fromClient(s, x)
	case codec.KindResult, codec.KindError:
		return f.srv.fromClient(s, x)
	}
	cat := f.catalog.load()
	var b *backend
	strip := 0
	switch string(m.Method) {
	case "tools/list":
		return f.list(x, cat, kTools)
	case "prompts/list":
		return f.list(x, cat, kPrompts)
	case "resources/list":
		return f.list(x, cat, kResources)
	case "resources/templates/list":
		return f.list(x, cat, kTemplates)
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
			return f.rep.replyErr(x, codec.CodeInvalidParams, "Unknown "+what+": "+string(name))
		}
		b, strip = r.b, r.strip
	case "resources/read", "resources/subscribe", "resources/unsubscribe":
		if b = cat.resourceOwner(string(m.URI)); b == nil {
			return f.rep.replyErr(x, CodeResourceNotFound, "Resource not found: "+string(m.URI))
		}
		if string(m.Method) != "resources/read" && !b.cfg.PerClient {
			return f.subs.handle(s, x, b)
		}
	case "completion/complete":
		return f.complete(s, x, cat)
	default:
		return f.rep.replyErr(x, codec.CodeMethodNotFound, "Method not found: "+string(m.Method))
	}
	f.fwd.track(s, x, b, strip)
	return true
}

// replyErr answers x with an error made by the fleet, without a backend, and reports it;
// false: nothing left for Run.
func (r *reporter) replyErr(x *transport.Exchange, code int, msg string) bool {
	bp := getBuf()
	*bp = codec.AppendError((*bp)[:0], x.Msg.ID, code, msg, nil)
	r.local(x, router.OutcomeError)
	x.Reply(*bp)
	putBuf(bp)
	return false
}

// reply answers x with a result made by the fleet, without a backend, and reports it.
func (r *reporter) reply(x *transport.Exchange, result []byte) bool {
	bp := getBuf()
	*bp = codec.AppendResult((*bp)[:0], x.Msg.ID, result)
	r.local(x, router.OutcomeOK)
	x.Reply(*bp)
	putBuf(bp)
	return false
}

// list answers a */list request from the merged catalog.
func (f *Fleet) list(x *transport.Exchange, cat *catalog, k kind) bool {
	cursor := x.Msg.Cursor
	if x.Msg.Flags&codec.CursorEscaped != 0 {
		cursor, _ = codec.Unquote(nil, cursor)
	}
	bp := getBuf()
	res, err := cat.page((*bp)[:0], k, cursor, f.cfg.PageSize)
	if err != nil {
		putBuf(bp)
		return f.rep.replyErr(x, codec.CodeInvalidParams, "Invalid params: invalid cursor")
	}
	*bp = res
	f.rep.reply(x, res)
	putBuf(bp)
	return false
}

// complete routes completion/complete by its ref: a prompt by (exposed) name, a
// resource template by URI. The ref is rewritten with a real parse: completion is not a
// hot path, and the name sits two levels deep.
func (f *Fleet) complete(s *router.Session, x *transport.Exchange, cat *catalog) bool {
	var p map[string]json.RawMessage
	if err := sonic.Unmarshal(x.Msg.Params, &p); err != nil {
		return f.rep.replyErr(x, codec.CodeInvalidParams, "Invalid params: completion/complete needs a ref")
	}
	var ref map[string]json.RawMessage
	if err := sonic.Unmarshal(p["ref"], &ref); err != nil {
		return f.rep.replyErr(x, codec.CodeInvalidParams, "Invalid params: completion/complete needs a ref")
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
			return f.rep.replyErr(x, codec.CodeInvalidParams, "Unknown prompt: "+name)
		}
		b = r.b
		if r.strip > 0 {
			ref["name"], _ = sonic.Marshal(name[r.strip:])
		}
	case "ref/resource":
		if b = cat.resourceOwner(uri); b == nil {
			return f.rep.replyErr(x, CodeResourceNotFound, "Resource not found: "+uri)
		}
	default:
		return f.rep.replyErr(x, codec.CodeInvalidParams, "Invalid params: unknown ref type "+typ)
	}
	p["ref"], _ = sonic.Marshal(ref)
	params, _ := sonic.Marshal(p)
	// The rewritten request replaces the exchange's bytes: x.Raw is the exchange's own
	// copy, so it can be swapped for a new one.
	raw := codec.AppendRequest(nil, x.Msg.ID, "completion/complete", params)
	var m codec.Message
	if err := codec.Scan(raw, &m); err != nil {
		return f.rep.replyErr(x, codec.CodeInternalError, "cannot rewrite completion request")
	}
	x.Raw, x.Msg = raw, m
	f.fwd.track(s, x, b, 0)
	return true
}
