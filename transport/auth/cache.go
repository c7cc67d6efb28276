package auth

import (
	"container/list"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"
)

// maxCacheAge bounds how long a verified token is trusted without a new verification,
// whatever its exp: a key the provider drops stops verifying within this much time even
// if no refresh noticed.
const maxCacheAge = time.Minute

// cacheShards splits the cache so that concurrent requests rarely wait on one lock.
const cacheShards = 16

// tokenCache remembers recently verified JWTs so that a client's next requests cost a
// hash and a map lookup instead of a signature verification. It is a bounded LRU keyed
// by a seeded hash of the token; an entry holds the token itself (in its Principal) and
// counts only if the token matches, so a hash collision is a miss, never a mix-up.
//
// A verification still under way when a key is dropped (it looked its key up before the
// refresh) must not store its token after the purge: entries are stored with the
// generation read before the key lookup, and one from before a purge is not stored.
type tokenCache struct {
	seed   maphash.Seed
	gen    atomic.Uint64 // purges so far
	shards [cacheShards]cacheShard
}

// cacheShard is one LRU of the cache.
type cacheShard struct {
	max   int
	mu    sync.Mutex
	byKey map[uint64]*list.Element
	lru   list.List // of *cacheEntry, most recent first
	_     [64]byte  // keeps two shards' locks off one cache line
}

type cacheEntry struct {
	key   uint64
	p     *Principal
	until time.Time // min(exp + skew, verification + maxCacheAge)
}

func newTokenCache(max int) *tokenCache {
	c := &tokenCache{seed: maphash.MakeSeed()}
	for i := range c.shards {
		c.shards[i].max = max/cacheShards + 1
		c.shards[i].byKey = make(map[uint64]*list.Element)
	}
	return c
}

// get returns the Principal of a verified token still trusted at now, or nil.
func (c *tokenCache) get(token []byte, now time.Time) *Principal {
	if c == nil {
		return nil
	}
	key := maphash.Bytes(c.seed, token)
	s := &c.shards[key%cacheShards]
	s.mu.Lock()
	defer s.mu.Unlock()
	el, ok := s.byKey[key]
	if !ok {
		return nil
	}
	e := el.Value.(*cacheEntry)
	if e.p.Token != string(token) {
		return nil
	}
	if !now.Before(e.until) {
		s.lru.Remove(el)
		delete(s.byKey, key)
		return nil
	}
	s.lru.MoveToFront(el)
	return e.p
}

// generation is what a verification reads before it looks its key up, and hands to put.
func (c *tokenCache) generation() uint64 {
	if c == nil {
		return 0
	}
	return c.gen.Load()
}

// put remembers p until until, evicting the shard's least recently used entry when full;
// nothing when the cache was purged since generation gen.
func (c *tokenCache) put(p *Principal, until time.Time, gen uint64) {
	if c == nil {
		return
	}
	key := maphash.String(c.seed, p.Token)
	s := &c.shards[key%cacheShards]
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.gen.Load() != gen { // read under the shard's lock: purge clears it after the bump
		return
	}
	if el, ok := s.byKey[key]; ok {
		el.Value = &cacheEntry{key: key, p: p, until: until}
		s.lru.MoveToFront(el)
		return
	}
	if s.lru.Len() >= s.max {
		old := s.lru.Back()
		s.lru.Remove(old)
		delete(s.byKey, old.Value.(*cacheEntry).key)
	}
	s.byKey[key] = s.lru.PushFront(&cacheEntry{key: key, p: p, until: until})
}

// purge forgets every token (a signing key was dropped).
func (c *tokenCache) purge() {
	if c == nil {
		return
	}
	c.gen.Add(1)
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		clear(s.byKey)
		s.lru.Init()
		s.mu.Unlock()
	}
}
