package policy

import (
	"hash/maphash"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Limiter keeps the token buckets of the rate limits, one table per limit, keyed as the
// limit says. It outlives policy reloads (Options.Limiter) and is what Sync shares.
//
// A bucket is a few words under its shard's lock, not a golang.org/x/time/rate.Limiter:
// other instances' consumption arrives as debt that may exceed a whole burst (see
// Sync), which rate.Limiter cannot hold, and a table of a hundred thousand keys should
// not carry a mutex per key.
//
// The key tables are bounded (Limit.MaxKeys). A bucket that has refilled to its burst
// is idle: dropping it changes nothing, since a new one starts full. When a shard is
// full, its idle buckets go first; if none is idle, the least recently used of a
// sample of its buckets goes, and that key starts afresh with a full burst (the one
// case where a limit admits more than its rate: bounded by one burst per eviction,
// and only when more keys are active at once than the table holds).
type Limiter struct {
	now     func() int64
	sharing atomic.Bool // a Sync runs: admitted requests are recorded for it
	mu      sync.Mutex  // serialises configure
	tables  atomic.Pointer[map[string]*table]
}

// LimiterOptions configure a Limiter.
type LimiterOptions struct {
	// Now is the clock, in nanoseconds on any monotonic scale. Default: time elapsed
	// since NewLimiter. Tests step their own.
	Now func() int64
}

// NewLimiter makes a Limiter without tables; an Engine configures them (New).
func NewLimiter(opts LimiterOptions) *Limiter {
	l := &Limiter{now: opts.Now}
	if l.now == nil {
		start := time.Now()
		l.now = func() int64 { return int64(time.Since(start)) }
	}
	l.tables.Store(&map[string]*table{})
	return l
}

// configure installs the tables of defs, keeping the buckets of each limit whose name
// and parameters are unchanged.
func (l *Limiter) configure(defs []limitDef) {
	l.mu.Lock()
	defer l.mu.Unlock()
	old := *l.tables.Load()
	m := make(map[string]*table, len(defs))
	for _, d := range defs {
		if t := old[d.Name]; t != nil && t.params == d.Limit.params() {
			m[d.Name] = t
			continue
		}
		m[d.Name] = newTable(d.Limit)
	}
	l.tables.Store(&m)
}

func (l *Limiter) table(name string) *table { return (*l.tables.Load())[name] }

// limitParams are what a bucket's state depends on.
type limitParams struct {
	rate    float64
	per     time.Duration
	burst   int
	maxKeys int
}

func (l Limit) params() limitParams { return limitParams{l.Rate, l.Per, l.Burst, l.MaxKeys} }

const numShards = 16

// table is one limit's buckets, sharded by key.
type table struct {
	name     string
	params   limitParams
	rate     float64 // tokens per nanosecond
	burst    float64
	perShard int
	seed     maphash.Seed
	shards   [numShards]shard
}

type shard struct {
	mu    sync.Mutex
	m     map[string]*bucket
	dirty []*bucket // buckets with consumption not yet published (Sync)
	_     [64]byte  // keeps neighbouring shards' locks off one cache line
}

// bucket is one key's token bucket. tokens may go below zero: the other instances'
// consumption is debt the refill pays back.
type bucket struct {
	key     string
	tokens  float64 // at last
	last    int64   // clock of the last refill
	pending uint32  // admitted here since the last publish
	dirty   bool    // in its shard's dirty list
}

func newTable(l Limit) *table {
	t := &table{
		name:     l.Name,
		params:   l.params(),
		rate:     l.Rate / float64(l.Per),
		burst:    float64(l.Burst),
		perShard: max(1, (l.MaxKeys+numShards-1)/numShards),
		seed:     maphash.MakeSeed(),
	}
	for i := range t.shards {
		t.shards[i].m = map[string]*bucket{}
	}
	return t
}

func (t *table) shard(key string) *shard {
	return &t.shards[maphash.String(t.seed, key)%numShards]
}

// shardOf is shard for a key being built (the same hash of the same bytes).
func (t *table) shardOf(key []byte) *shard {
	return &t.shards[maphash.Bytes(t.seed, key)%numShards]
}

// refill brings b up to now.
func (t *table) refill(b *bucket, now int64) {
	if dt := now - b.last; dt > 0 {
		b.tokens = math.Min(t.burst, b.tokens+float64(dt)*t.rate)
		b.last = now
	}
}

// get returns key's bucket, making a full one (evicting when the shard is full).
// Called with s.mu held. The lookup does not copy key; a new bucket does.
func (t *table) get(s *shard, key []byte, now int64) *bucket {
	b := s.m[string(key)]
	if b == nil {
		if len(s.m) >= t.perShard {
			t.evict(s, now)
		}
		b = &bucket{key: string(key), tokens: t.burst, last: now}
		s.m[b.key] = b
	}
	t.refill(b, now)
	return b
}

// evict makes room in a full shard: every idle bucket goes; if none was idle, the
// least recently refilled of a sample of 8 goes. Called with s.mu held.
func (t *table) evict(s *shard, now int64) {
	n := len(s.m)
	var lru *bucket
	sampled := 0
	for k, b := range s.m {
		t.refill(b, now)
		if b.tokens >= t.burst {
			delete(s.m, k)
			continue
		}
		if sampled < 8 && (lru == nil || b.last < lru.last) {
			lru = b
		}
		sampled++
	}
	if len(s.m) == n && lru != nil {
		delete(s.m, lru.key)
	}
}

// take takes a token from key's bucket: the bucket when admitted, else nil and how long
// until a token is there.
func (t *table) take(key []byte, now int64) (*bucket, time.Duration) {
	s := t.shardOf(key)
	s.mu.Lock()
	b := t.get(s, key, now)
	if b.tokens >= 1 {
		b.tokens--
		s.mu.Unlock()
		return b, 0
	}
	wait := math.Ceil((1 - b.tokens) / t.rate)
	s.mu.Unlock()
	return nil, time.Duration(math.Min(wait, float64(maxRetryAfter)))
}

// maxRetryAfter caps a refusal's hint (a bucket deep in debt, a rate of a few per day).
const maxRetryAfter = 24 * time.Hour

// refund gives back a token taken by take (another limit refused the request).
func (t *table) refund(b *bucket) {
	s := t.shard(b.key)
	s.mu.Lock()
	b.tokens = math.Min(t.burst, b.tokens+1)
	s.mu.Unlock()
}

// commit records an admitted request for Sync.
func (t *table) commit(b *bucket) {
	s := t.shard(b.key)
	s.mu.Lock()
	b.pending++
	if !b.dirty {
		b.dirty = true
		s.dirty = append(s.dirty, b)
	}
	s.mu.Unlock()
}

// debit applies n requests admitted by another instance to key's bucket.
func (t *table) debit(key []byte, n uint64, now int64) {
	s := t.shardOf(key)
	s.mu.Lock()
	b := t.get(s, key, now)
	b.tokens -= float64(n)
	s.mu.Unlock()
}

// Len returns how many keys the tables hold, in all (for tests and the status page).
func (l *Limiter) Len() int {
	n := 0
	for _, t := range *l.tables.Load() {
		for i := range t.shards {
			s := &t.shards[i]
			s.mu.Lock()
			n += len(s.m)
			s.mu.Unlock()
		}
	}
	return n
}

// Sweep drops the idle buckets (refilled to their burst) of every table. Sync runs it
// after each publish; without Sync, full shards sweep themselves when a key arrives.
func (l *Limiter) Sweep() {
	now := l.now()
	for _, t := range *l.tables.Load() {
		for i := range t.shards {
			s := &t.shards[i]
			s.mu.Lock()
			for k, b := range s.m {
				t.refill(b, now)
				if b.tokens >= t.burst {
					delete(s.m, k)
				}
			}
			s.mu.Unlock()
		}
	}
}
