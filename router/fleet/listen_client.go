package fleet

import (
	"sync"

	"github.com/bytedance/sonic"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/router"
	"github.com/mcprouter/mcprouter/router/modern"
	"github.com/mcprouter/mcprouter/transport"
)

// subscriptions/listen for stateless (2026-07-28) clients: the stream that replaces a
// session's GET stream. The fleet acknowledges the subset of the client's filter it
// honours, then sends each list change of the merged catalog the client asked for, every
// message tagged with the subscription's id (the listen request's JSON-RPC id); the
// stream ends when the client closes it (the transport's OnAbandon) or, gracefully, with
// a result when the router shuts down (EndListeners).
//
// List changes reach it wherever they come from: a backend's list_changed here, or
// another router instance's over the bus, both of which refresh the catalog, whose
// change notices feed clientListeners.changed.
//
// Not honoured yet: resourceSubscriptions (resource updates go to sessions through the
// subscriber, which delivers on transport sessions); they are left out of the
// acknowledgement, which the revision allows.

// clientListeners holds this instance's listen streams. The zero value is ready.
type clientListeners struct {
	mu     sync.Mutex
	m      map[*clientListener]struct{}
	closed bool // EndListeners ran: no new streams
}

// clientListener is one listen stream: its exchange, open until the client leaves or
// the router ends it, and the notifications it asked for.
type clientListener struct {
	mu   sync.Mutex // serializes sends with the end of the exchange
	x    *transport.Exchange
	done bool
	id   []byte // the subscription id: the request's raw JSON-RPC id, copied

	tools, prompts, resources bool
}

// listenFilter is the params.notifications of subscriptions/listen.
type listenFilter struct {
	Notifications struct {
		ToolsListChanged      bool     `json:"toolsListChanged"`
		PromptsListChanged    bool     `json:"promptsListChanged"`
		ResourcesListChanged  bool     `json:"resourcesListChanged"`
		ResourceSubscriptions []string `json:"resourceSubscriptions"`
	} `json:"notifications"`
}

// Listen implements router.StatelessFleet: it opens a listen stream for stateless
// session s on x, which it finishes when the stream ends.
func (f *Fleet) Listen(s *router.Session, x *transport.Exchange) {
	var p listenFilter
	if len(x.Msg.Params) > 0 {
		if err := sonic.Unmarshal(x.Msg.Params, &p); err != nil {
			f.rep.replyErr(x, codec.CodeInvalidParams, "Invalid params: subscriptions/listen needs a notifications object")
			return
		}
	}
	n := p.Notifications
	l := &clientListener{x: x, id: append([]byte(nil), x.Msg.ID...)}
	l.tools = n.ToolsListChanged && f.offers("tools")
	l.prompts = n.PromptsListChanged && f.offers("prompts")
	l.resources = n.ResourcesListChanged && f.offers("resources")

	ls := &f.catalog.listeners
	l.mu.Lock()
	defer l.mu.Unlock()
	if !ls.add(l) {
		f.rep.replyErr(x, codec.CodeOverloaded, "the router is shutting down: subscriptions/listen refused")
		return
	}
	if err := x.Send(l.ack()); err != nil {
		ls.remove(l)
		f.rep.replyErr(x, codec.CodeInvalidRequest, "subscriptions/listen needs a stream: accept text/event-stream ("+err.Error()+")")
		return
	}
	x.OnAbandon(func() {
		ls.remove(l)
		l.end(nil)
	})
}

// offers reports whether any backend declares the capability cap (tools, prompts,
// resources): the list changes the router can tell of.
func (f *Fleet) offers(cap string) bool {
	for _, b := range f.backends {
		b.mu.Lock()
		has := hasMember(b.caps, cap)
		b.mu.Unlock()
		if has {
			return true
		}
	}
	return false
}

// EndListeners implements router.StatelessFleet: every listen stream ends with its
// result (a graceful end, which the client tells from a dropped connection), and no
// new one opens.
func (f *Fleet) EndListeners() {
	ls := &f.catalog.listeners
	ls.mu.Lock()
	ls.closed = true
	all := make([]*clientListener, 0, len(ls.m))
	for l := range ls.m {
		all = append(all, l)
	}
	clear(ls.m)
	ls.mu.Unlock()
	for _, l := range all {
		l.mu.Lock()
		l.end(l.completion())
		l.mu.Unlock()
	}
}

func (ls *clientListeners) add(l *clientListener) bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.closed {
		return false
	}
	if ls.m == nil {
		ls.m = make(map[*clientListener]struct{})
	}
	ls.m[l] = struct{}{}
	return true
}

func (ls *clientListeners) remove(l *clientListener) {
	ls.mu.Lock()
	delete(ls.m, l)
	ls.mu.Unlock()
}

// changed tells the listen streams that asked for it that a merged list changed
// (method: its list_changed notification).
func (ls *clientListeners) changed(method string) {
	ls.mu.Lock()
	var to []*clientListener
	for l := range ls.m {
		if l.wants(method) {
			to = append(to, l)
		}
	}
	ls.mu.Unlock()
	for _, l := range to {
		l.notify(method)
	}
}

func (l *clientListener) wants(method string) bool {
	switch method {
	case "notifications/tools/list_changed":
		return l.tools
	case "notifications/prompts/list_changed":
		return l.prompts
	case "notifications/resources/list_changed":
		return l.resources
	}
	return false
}

// notify sends a parameterless notification tagged with the subscription id.
func (l *clientListener) notify(method string) {
	msg := codec.AppendNotification(nil, method, l.appendMeta(nil))
	l.mu.Lock()
	if !l.done {
		l.x.Send(msg)
	}
	l.mu.Unlock()
}

// end finishes the exchange: with result, or without a reply (the client left).
// Called with l.mu held.
func (l *clientListener) end(result []byte) {
	if l.done {
		return
	}
	l.done = true
	if result == nil {
		l.x.Done()
		return
	}
	l.x.Reply(codec.AppendResult(nil, l.id, result))
}

// appendMeta appends {"_meta":{subscriptionId}} with the members of params after it
// (members: more members of params, "" for none).
func (l *clientListener) appendMeta(dst []byte, members ...string) []byte {
	dst = append(dst, `{"_meta":{"`+modern.KeySubscriptionID+`":`...)
	dst = append(dst, l.id...)
	dst = append(dst, '}')
	for _, m := range members {
		dst = append(dst, ',')
		dst = append(dst, m...)
	}
	return append(dst, '}')
}

// ack is the acknowledgement: the subset of the filter that is honoured.
func (l *clientListener) ack() []byte {
	notes := []byte(`"notifications":{`)
	first := true
	for _, f := range []struct {
		on   bool
		name string
	}{{l.tools, "toolsListChanged"}, {l.prompts, "promptsListChanged"}, {l.resources, "resourcesListChanged"}} {
		if !f.on {
			continue
		}
		if !first {
			notes = append(notes, ',')
		}
		first = false
		notes = append(notes, '"')
		notes = append(notes, f.name...)
		notes = append(notes, `":true`...)
	}
	notes = append(notes, '}')
	return codec.AppendNotification(nil, "notifications/subscriptions/acknowledged", l.appendMeta(nil, string(notes)))
}

// completion is the result that ends the stream gracefully.
func (l *clientListener) completion() []byte {
	dst := append([]byte(nil), `{"resultType":"complete","_meta":{"`+modern.KeySubscriptionID+`":`...)
	dst = append(dst, l.id...)
	return append(dst, '}', '}')
}
