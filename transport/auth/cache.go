package auth

import (
	"container/list"
	"hash/maphash"
	"sync"
	"time"
)

// maxCacheAge bounds how long a verified token is trusted without a new verification,
// whatever its exp: a key the provider drops stops verifying within this much time even
// if no refresh noticed.
const maxCacheAge = time.Minute

// tokenCache remembers recently verified JWTs so that a client's next requests cost a
// hash and a map lookup instead of a signature verification. It is a bounded LRU keyed
// by a seeded hash of the token; an entry holds the token itself (in its Principal) and
// counts only if the token matches, so a hash collision is a miss, never a mix-up.
type tokenCache struct {
	seed maphash.Seed
	max  int

	mu    sync.Mutex
	byKey map[uint64]*list.Element
	lru   list.List // of *cacheEntry, most recent first
}

type cacheEntry struct {
	key   uint64
	p     *Principal
	until time.Time // min(exp + skew, verification + maxCacheAge)
}

func newTokenCache(max int) *tokenCache {
	return &tokenCache{seed: maphash.MakeSeed(), max: max, byKey: make(map[uint64]*list.Element)}
}

// get returns the Principal of a verified token, or nil.
func (c *tokenCache) get(token []byte, now time.Time) *Principal {
	if c == nil {
		return nil
	}
	key := maphash.Bytes(c.seed, token)
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.byKey[key]
	if !ok {
		return nil
	}
	e := el.Value.(*cacheEntry)
	if e.p.Token != string(token) {
		return nil
	}
	if !now.Before(e.until) {
		c.lru.Remove(el)
		delete(c.byKey, key)
		return nil
	}
	c.lru.MoveToFront(el)
	return e.p
}

// put remembers p (verified now) until until, evicting the least recently used entry
// when full.
func (c *tokenCache) put(p *Principal, until time.Time) {
	if c == nil {
		return
	}
	key := maphash.String(c.seed, p.Token)
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byKey[key]; ok {
		el.Value = &cacheEntry{key: key, p: p, until: until}
		c.lru.MoveToFront(el)
		return
	}
	if c.lru.Len() >= c.max {
		old := c.lru.Back()
		c.lru.Remove(old)
		delete(c.byKey, old.Value.(*cacheEntry).key)
	}
	c.byKey[key] = c.lru.PushFront(&cacheEntry{key: key, p: p, until: until})
}

// purge forgets every token (a signing key was dropped).
func (c *tokenCache) purge() {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.byKey)
	c.lru.Init()
}

func (c *tokenCache) len() int {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Len()
}
