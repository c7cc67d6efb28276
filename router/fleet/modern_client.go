package fleet

import (
	"bytes"

	"github.com/mcprouter/mcprouter/router"
	"github.com/mcprouter/mcprouter/router/modern"
)

// The fleet's side of stateless (2026-07-28) clients (router.StatelessFleet). The
// router makes a Session for each stateless request (router/stateless.go) and sends it
// here like any other: it is forwarded, tracked and answered the usual way. What is
// particular to it lives here: cancellation when its client closes the request's
// stream, and the caching fields of the lists the fleet merges.

// CancelRequest implements router.StatelessFleet: the client of stateless session s
// closed the stream of its request id, which is how the revision cancels a request.
// The backend is told (a notifications/cancelled, or the closing of the upstream
// request's stream for a 2026-07-28 backend) and the exchange ends without an answer; a
// listen stream ends.
func (f *Fleet) CancelRequest(s *router.Session, id []byte) {
	if l := f.catalog.listeners.of(s); l != nil {
		f.listening.end(l, nil) // a listen stream (stdio cancels it by notification)
		return
	}
	f.fwd.cancel(s, id) // counts it (Stats.Cancelled) when it was still in flight
	f.srv.park.cancelResumed(s, id)
}

// ListCache implements router.StatelessFleet: the caching fields of a merged list. A
// list built from several backends may be kept no longer than the shortest-lived part,
// and is public only when every part is (never public from a private part); a backend
// that said nothing (a 2025 one) counts as ttlMs 0 and private. A list filtered by a
// policy is private (policy_endpoints.go).
func (f *Fleet) ListCache(method []byte) modern.Cache {
	return f.routes.pol.privateCache(f.catalog.listCache(method))
}

// listKey names one backend's list of one kind.
type listKey struct {
	b *backend
	k kind
}

// noteCache keeps the caching fields of page page of b's list k as the catalog fetches
// it: a list of several pages is as fresh as its stalest page.
func (cb *catalogBuilder) noteCache(b *backend, k kind, page int, res []byte) {
	c := modern.ReadCache(res)
	if page > 0 {
		if prev, ok := cb.caches.Load(listKey{b, k}); ok {
			c = prev.(modern.Cache).Merge(c)
		}
	}
	cb.caches.Store(listKey{b, k}, c)
}

// listCache merges the caching fields of every backend's last list of the kind method
// names (modern.Cache.Merge); with no backend listing it, ttlMs 0 and private.
func (cb *catalogBuilder) listCache(method []byte) modern.Cache {
	k, ok := kindOfList(method)
	if !ok {
		return modern.Cache{}
	}
	var merged modern.Cache
	first := true
	for _, b := range cb.set.all() {
		v, ok := cb.caches.Load(listKey{b, k})
		if !ok {
			continue
		}
		if first {
			merged, first = v.(modern.Cache), false
		} else {
			merged = merged.Merge(v.(modern.Cache))
		}
	}
	return merged
}

// kindOfList is the kind a list method answers.
func kindOfList(method []byte) (kind, bool) {
	for k := kind(0); k < numKinds; k++ {
		if kindInfo[k].method == string(method) {
			return k, true
		}
	}
	return 0, false
}

// paramHeaders is a copy of the Mcp-Param-* headers of a stateless client's request e,
// for its 2026-07-28 backend (upstream.WithParamHeaders): the arguments they mirror
// travel unchanged, so they do too. A copy, because the exchange may be answered (and
// recycled) while the request is being sent.
func paramHeaders(e *entry) []byte {
	if e.x == nil || !e.x.Stateless || len(e.x.Headers.Params) == 0 {
		return nil
	}
	return bytes.Clone(e.x.Headers.Params)
}
