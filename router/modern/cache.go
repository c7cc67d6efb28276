package modern

import (
	"strconv"

	"github.com/mcprouter/mcprouter/codec"
)

// Scope is a result's cacheScope.
type Scope uint8

const (
	// ScopePrivate is the zero value: a result whose scope is unknown (a 2025 backend
	// says nothing) must not be shared across authorization contexts.
	ScopePrivate Scope = iota
	ScopePublic
)

func (s Scope) String() string {
	if s == ScopePublic {
		return "public"
	}
	return "private"
}

// Cache holds the caching fields of a cacheable result (server/utilities/caching).
type Cache struct {
	TTLms int64 // freshness in milliseconds, >= 0
	Scope Scope
}

// ReadCache reads ttlMs and cacheScope of a raw result. What is absent or invalid reads
// as the most conservative value: ttlMs 0 (immediately stale, the specification's
// default) and private (a result that did not say it is public is not).
func ReadCache(result []byte) Cache {
	var c Cache
	eachMember(result, func(k, v []byte) bool {
		switch {
		case codec.KeyIs(k, "ttlMs"):
			if n, err := strconv.ParseInt(string(v), 10, 64); err == nil && n > 0 {
				c.TTLms = n
			}
		case codec.KeyIs(k, "cacheScope"):
			if string(v) == `"public"` {
				c.Scope = ScopePublic
			}
		}
		return true
	})
	return c
}

// Merge combines the caching fields of two results that went into one (an aggregated
// list, a merged discover): the smaller ttlMs and the more restrictive scope, so a
// merged result is never public when a part of it was private.
func (c Cache) Merge(o Cache) Cache {
	if o.TTLms < c.TTLms {
		c.TTLms = o.TTLms
	}
	if o.Scope == ScopePrivate {
		c.Scope = ScopePrivate
	}
	return c
}

// MergeAll merges the caching fields of every part; no part at all gives the zero Cache
// (ttlMs 0, private).
func MergeAll(parts ...Cache) Cache {
	if len(parts) == 0 {
		return Cache{}
	}
	c := parts[0]
	for _, p := range parts[1:] {
		c = c.Merge(p)
	}
	return c
}

// AppendFields appends `"ttlMs":N,"cacheScope":"..."` (no braces, no leading comma).
func (c Cache) AppendFields(dst []byte) []byte {
	dst = append(dst, `"ttlMs":`...)
	ttl := c.TTLms
	if ttl < 0 {
		ttl = 0
	}
	dst = strconv.AppendInt(dst, ttl, 10)
	if c.Scope == ScopePublic {
		return append(dst, `,"cacheScope":"public"`...)
	}
	return append(dst, `,"cacheScope":"private"`...)
}
