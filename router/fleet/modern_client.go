package fleet

import (
	"bytes"

	"github.com/mcprouter/mcprouter/codec"
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
		f.endListener(l, nil) // a listen stream (stdio cancels it by notification)
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

// forLegacyBackend turns the wire form of a stateless client's request e (bp) into what
// a 2025 backend c expects: without the per-request _meta keys of 2026-07-28, which a
// server that speaks both generations would take for a stateless request of its own
// (and judge against its session's version). Other requests pass as they are.
func forLegacyBackend(c *upConn, e *entry, bp *[]byte) *[]byte {
	if c.modern || e.x == nil || !e.x.Stateless {
		return bp
	}
	out := getBuf()
	*out = stripModernMeta((*out)[:0], *bp)
	putBuf(bp)
	return out
}

// stripModernMeta appends msg without the io.modelcontextprotocol/ keys of its
// params._meta (a progress token and the client's own keys stay).
func stripModernMeta(dst, msg []byte) []byte {
	var m codec.Message
	if codec.Scan(msg, &m) != nil {
		return append(dst, msg...)
	}
	meta := memberValue(m.Params, "_meta")
	var w codec.Walker
	if meta == nil || !w.Object(meta) {
		return append(dst, msg...)
	}
	off := func(v []byte) int { return cap(msg) - cap(v) }
	kept := make([]byte, 0, len(meta))
	kept = append(kept, '{')
	dropped := false
	for key, _, val, ok := w.Next(); ok; key, _, val, ok = w.Next() {
		if bytes.HasPrefix(key, []byte(modernKeyPrefix)) {
			dropped = true
			continue
		}
		if len(kept) > 1 {
			kept = append(kept, ',')
		}
		kept = append(kept, msg[off(key)-1:off(val)+len(val)]...)
	}
	if !dropped {
		return append(dst, msg...)
	}
	kept = append(kept, '}')
	return codec.AppendSplices(dst, msg, []codec.Splice{{Old: meta, New: kept}})
}

// modernKeyPrefix starts the _meta keys the revisions reserve.
const modernKeyPrefix = "io.modelcontextprotocol/"

// memberValue returns the raw value of member key of the JSON object obj, nil if none.
func memberValue(obj []byte, key string) []byte {
	var w codec.Walker
	if !w.Object(obj) {
		return nil
	}
	for k, _, v, ok := w.Next(); ok; k, _, v, ok = w.Next() {
		if string(k) == key {
			return v
		}
	}
	return nil
}
