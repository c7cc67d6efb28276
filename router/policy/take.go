package policy

import (
	"strconv"
	"time"
)

// Verdict is the rate limits' answer to one request.
type Verdict struct {
	Allowed bool
	// RetryAfter is, for a refused request, when the refusing limit's bucket has a
	// token again (for the error's retryAfterMs and the HTTP Retry-After).
	RetryAfter time.Duration
	// Limit names the limit that refused, Key its key (for the log).
	Limit, Key string
}

// Take counts one request against every limit whose match it satisfies: it is
// admitted when each of their buckets has a token, and then takes one from each; a
// refused request takes none (the tokens of the limits checked before the refusing one
// are given back). RetryAfter is the refusing limit's.
//
// A match that cannot be evaluated counts the request (fail closed) and is logged.
// Take uses the same Input as Decide (call Decide first: the limits count requests
// that the rules let through) and the router calls it for requests, not notifications
// (which have no reply to carry a refusal).
func (e *Engine) Take(s *Subject, in *Input) Verdict {
	if e.limiter == nil || len(e.c.limits) == 0 {
		return Verdict{Allowed: true}
	}
	in.subj, in.unknown = s, 0
	now := e.limiter.now()
	tabs := e.tables()
	type taken struct {
		t *table
		b *bucket
	}
	var buf [4]taken
	got := buf[:0]
	for i := range e.c.limits {
		d := &e.c.limits[i]
		if d.match != nil {
			o, err := d.match.eval(in)
			if o == isFalse {
				continue
			}
			if o == isError {
				e.log.Warn("policy: limit match failed, the request counts", "limit", d.Name, "principal", s.id, "method", in.Method, "err", err)
			}
		}
		t := tabs[i]
		if t == nil {
			continue // a reload removed the limit while this request was deciding
		}
		var kb [128]byte // most keys fit: no allocation to find a bucket
		key := appendLimitKey(kb[:0], d.Key, s, in)
		b, wait := t.take(key, now)
		if b == nil {
			for _, g := range got {
				g.t.refund(g.b)
			}
			e.stats.limited[d.index].Add(1)
			return Verdict{RetryAfter: wait, Limit: d.Name, Key: string(key)}
		}
		got = append(got, taken{t, b})
	}
	if e.limiter.sharing.Load() {
		for _, g := range got {
			g.t.commit(g.b)
		}
	}
	return Verdict{Allowed: true}
}

// tables are the Limiter's current tables of e's limits, in e.c.limits order (nil for
// a limit a reload removed): resolved by name once per configuration of the Limiter,
// not at every request.
func (e *Engine) tables() []*table {
	m := e.limiter.tables.Load()
	if r := e.resolved.Load(); r != nil && r.m == m {
		return r.ts
	}
	r := &resolvedTables{m: m, ts: make([]*table, len(e.c.limits))}
	for i := range e.c.limits {
		r.ts[i] = (*m)[e.c.limits[i].Name]
	}
	e.resolved.Store(r)
	return r.ts
}

// resolvedTables are an Engine's tables in one configuration of its Limiter.
type resolvedTables struct {
	m  *map[string]*table
	ts []*table
}

// appendLimitKey appends a request's key for a limit. A part the request does not have (the
// tool of a resources/read) is empty: such requests share that part's bucket. The
// parts of a composite key are each prefixed with their length, so that no choice of
// names makes two different combinations one key.
func appendLimitKey(dst []byte, parts KeyParts, s *Subject, in *Input) []byte {
	part := func(p KeyPart) string {
		switch p {
		case KeyPrincipal:
			return s.id
		case KeyMethod:
			return in.Method
		case KeyBackend:
			return in.Backend
		case KeyTool:
			return in.Tool
		case KeyPrompt:
			return in.Prompt
		case KeyURI:
			return in.URI
		}
		return ""
	}
	if len(parts) == 1 {
		return append(dst, part(parts[0])...)
	}
	for _, p := range parts {
		v := part(p)
		dst = strconv.AppendInt(dst, int64(len(v)), 10)
		dst = append(dst, ':')
		dst = append(dst, v...)
	}
	return dst
}
