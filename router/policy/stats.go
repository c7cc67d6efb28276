package policy

import "sync/atomic"

// Stats are the policy's counters, for the Prometheus exporter to read at scrape time
// (the hot path only adds to preallocated atomics: no lock, no label lookup).
type Stats struct {
	reasons [len(reasonNames)]atomic.Uint64
	// denials per rule (configuration index), for ReasonDeny and ReasonError.
	denials []atomic.Uint64
	// limited per limit (configuration index).
	limited []atomic.Uint64

	listErrors atomic.Uint64
	viewHits   atomic.Uint64
	viewMisses atomic.Uint64
}

func newStats(c *compiled) *Stats {
	return &Stats{
		denials: make([]atomic.Uint64, len(c.cfg.Rules)),
		limited: make([]atomic.Uint64, len(c.cfg.Limits)),
	}
}

func (s *Stats) decided(d Decision) {
	s.reasons[d.Reason].Add(1)
	if d.Rule >= 0 && !d.Allowed {
		s.denials[d.Rule].Add(1)
	}
}

// Snapshot is a copy of the counters.
type Snapshot struct {
	// Decisions counts the decisions by reason (every Reason is present).
	Decisions map[string]uint64
	// DeniedByRule counts the denials (deny rules and failed rules) by rule name.
	DeniedByRule map[string]uint64
	// LimitedByLimit counts the requests each limit refused, by limit name.
	LimitedByLimit map[string]uint64
	// ListErrors counts list evaluations that failed (the item was hidden).
	ListErrors uint64
	// ViewHits and ViewMisses count the list filter's cache lookups.
	ViewHits, ViewMisses uint64
}

// Stats returns the engine's counters since New.
func (e *Engine) Stats() Snapshot {
	s := e.stats
	out := Snapshot{
		Decisions:      make(map[string]uint64, len(reasonNames)),
		DeniedByRule:   make(map[string]uint64, len(s.denials)),
		LimitedByLimit: make(map[string]uint64, len(s.limited)),
		ListErrors:     s.listErrors.Load(),
		ViewHits:       s.viewHits.Load(),
		ViewMisses:     s.viewMisses.Load(),
	}
	for i, n := range reasonNames {
		out.Decisions[n] = s.reasons[i].Load()
	}
	for i, r := range e.c.cfg.Rules {
		out.DeniedByRule[r.Name] = s.denials[i].Load()
	}
	for i, l := range e.c.cfg.Limits {
		out.LimitedByLimit[l.Name] = s.limited[i].Load()
	}
	return out
}
