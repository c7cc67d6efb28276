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

// add records key as one of sess's subscriptions (once).
func (m sessionKeys) add(sess *router.Session, key subKey) {
	if k := m[sess]; !k.has(key) {
		m[sess] = append(k, key)
	}
}

// remove takes key out of sess's subscriptions, and sess out of the index when it has
// none left.
func (m sessionKeys) remove(sess *router.Session, key subKey) {
	k := m[sess]
	i := slices.Index(k, key)
	if i < 0 {
		return
	}
	if k = slices.Delete(k, i, i+1); len(k) == 0 {
		delete(m, sess)
		return
	}
	m[sess] = k
}
