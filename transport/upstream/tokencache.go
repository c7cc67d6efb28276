package upstream

import (
	"container/list"
	"context"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/mcprouter/mcprouter/internal/defaults"
)

// tokenCache keeps the bearer tokens the router obtained from an authorization server,
// by key: a principal's ID and the SHA-256 of the token it presented for token exchange
// (exchangeKey), "" for the router's own client credentials token. A token is used until shortly before it expires (refreshAhead),
// or until a backend refuses it. Concurrent requests that miss on one key share one
// fetch; the fetch runs on its own context (bounded by fetchTimeout) so that the caller
// that started it giving up does not fail the others. The cache holds at most max keys
// and drops the least recently used beyond.
type tokenCache struct {
	max   int
	now   func() time.Time // time.Now; tests move the clock
	group singleflight.Group

	mu  sync.Mutex
	lru *list.List // of *cachedToken, most recently used first
	m   map[string]*list.Element
}

// cachedToken is one cached token: the header value it makes ("Bearer ...") and when to
// stop using it (zero: until refused).
type cachedToken struct {
	key, value string
	renewAt    time.Time
}

// Bounds of the cache's timing.
const (
	// refreshAhead is how long before its expiry a token is replaced: a request must
	// not reach the backend with a token that expires on the way. A token that lives
	// less than four times this is replaced after three quarters of its life.
	refreshAhead = 10 * time.Second
	// fetchTimeout bounds one request to the token endpoint.
	fetchTimeout = 30 * time.Second
	// DefaultTokenCacheSize is how many subject tokens' exchanged tokens a token
	// exchange keeps.
	DefaultTokenCacheSize = 10000
)

func newTokenCache(max int) *tokenCache {
	return &tokenCache{max: defaults.Positive(max, DefaultTokenCacheSize), now: time.Now, lru: list.New(), m: make(map[string]*list.Element)}
}

// fetched is what a fetch returns: the header value and the token's expiry (zero: none
// given).
type fetched struct {
	value  string
	expiry time.Time
}

// fetcher gets a new token for a tokenCache. A credential is its own fetcher, so that a
// request that finds its token cached allocates nothing.
type fetcher interface {
	fetch(ctx context.Context) (fetched, error)
}

// get returns the cached value for key, or fetches one with f (sharing a fetch in
// progress for key). ctx bounds only this caller's wait.
func (c *tokenCache) get(ctx context.Context, key string, f fetcher) (string, error) {
	if v, ok := c.lookup(key); ok {
		return v, nil
	}
	ch := c.group.DoChan(key, func() (any, error) {
		if v, ok := c.lookup(key); ok {
			return v, nil // a fetch that ended between our lookup and this one stored it
		}
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), fetchTimeout)
		defer cancel()
		start := c.now()
		t, err := f.fetch(fctx)
		if err != nil {
			return "", err
		}
		c.store(key, t.value, renewAt(start, t.expiry))
		return t.value, nil
	})
	select {
	case r := <-ch:
		if r.Err != nil {
			return "", r.Err
		}
		return r.Val.(string), nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// renewAt is when to stop using a token fetched at start that expires at expiry.
func renewAt(start, expiry time.Time) time.Time {
	if expiry.IsZero() {
		return time.Time{}
	}
	ahead := refreshAhead
	if life := expiry.Sub(start); life < 4*refreshAhead {
		ahead = life / 4
	}
	return expiry.Add(-ahead)
}

// lookup returns key's value if it is still to be used, and marks it recently used.
func (c *tokenCache) lookup(key string) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[key]
	if !ok {
		return "", false
	}
	t := e.Value.(*cachedToken)
	if !t.renewAt.IsZero() && !c.now().Before(t.renewAt) {
		c.lru.Remove(e)
		delete(c.m, key)
		return "", false
	}
	c.lru.MoveToFront(e)
	return t.value, true
}

func (c *tokenCache) store(key, value string, renew time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[key]; ok {
		t := e.Value.(*cachedToken)
		t.value, t.renewAt = value, renew
		c.lru.MoveToFront(e)
		return
	}
	c.m[key] = c.lru.PushFront(&cachedToken{key: key, value: value, renewAt: renew})
	for c.lru.Len() > c.max {
		old := c.lru.Back()
		c.lru.Remove(old)
		delete(c.m, old.Value.(*cachedToken).key)
	}
}

// drop forgets key's value if it is still value (a backend refused it), so that the
// next get fetches a new one. A newer value that replaced it meanwhile stays.
func (c *tokenCache) drop(key, value string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[key]; ok && e.Value.(*cachedToken).value == value {
		c.lru.Remove(e)
		delete(c.m, key)
	}
}

// len is the number of cached tokens.
func (c *tokenCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Len()
}
