package fleet

import (
	"slices"

	"github.com/mcprouter/mcprouter/router"
)

// sessionKeys indexes the subscriptions by session, for the session's limit, its record
// and its end. Every subscribed session has an entry for as long as it holds a
// subscription; the entry goes with its last one.
type sessionKeys map[*router.Session]keySet

// keySet is one session's subscriptions: a few keys (Config.MaxSubscriptions bounds
// them), in a slice. It was a map per session, whose header and first group of eight
// slots cost about 360 bytes for the one key most sessions hold: at 100,000 subscribed
// sessions 36 MB of the routers' heap, and twice that in RSS. One key in a slice costs
// its 24 bytes.
type keySet []subKey

// has reports whether key is in the set.
func (k keySet) has(key subKey) bool { return slices.Contains(k, key) }

// add records key as one of sess's subscriptions (once). only, when not nil, is a set
// of key alone, with no room to grow (an append copies it), that the caller shares
// between the sessions subscribed to key: a session whose one subscription is key holds
// that set instead of a slice of its own, where each held its 24 bytes and a copy of
// the URI (most sessions hold one subscription).
func (m sessionKeys) add(sess *router.Session, key subKey, only keySet) {
	k := m[sess]
	switch {
	case k.has(key):
	case len(k) == 0 && only != nil:
		m[sess] = only
	default:
		m[sess] = append(k, key)
	}
}

// remove takes key out of sess's subscriptions, and sess out of the index when it has
// none left. A set of one key may be shared (add's only): it is never written; a longer
// one is the session's own (add's append copied).
func (m sessionKeys) remove(sess *router.Session, key subKey) {
	k := m[sess]
	i := slices.Index(k, key)
	switch {
	case i < 0:
	case len(k) == 1:
		delete(m, sess)
	default:
		m[sess] = slices.Delete(k, i, i+1)
	}
}
