package workers

// Stats is a snapshot of a Dispatcher's counters. Each figure is read atomically but
// the snapshot as a whole is not: it is for metrics and tests, not for decisions.
type Stats struct {
	Shards []ShardStats

	// PoolCap is the total number of workers allowed (Config.PoolSize, rounded up to a
	// multiple of Shards with PoolPerShard).
	PoolCap int
	// Busy is the number of jobs submitted to a pool or running on the caller of
	// DispatchRun and not yet finished, plus, for the instant a fast-path Prepare
	// runs, the worker that job has reserved.
	Busy int
	// Workers is the number of live worker goroutines, busy or idle.
	Workers int

	// Overloads is the total number of Dispatch calls refused with ErrOverloaded.
	Overloads uint64
	// Panics counts panics recovered from Prepare and Run.
	Panics uint64
	// FailPanics counts panics recovered from Fail (and from the panic hook).
	FailPanics uint64
}

// ShardStats describes one shard.
type ShardStats struct {
	// Queued is the number of accepted jobs waiting to be prepared.
	Queued int
	// Ready is the number of prepared jobs waiting for a worker.
	Ready int
	// Overloads counts Dispatch calls refused because this queue was full.
	Overloads uint64
	// Prepared counts jobs whose Prepare was called.
	Prepared uint64
	// Inline counts the jobs among Prepared that took the fast path: Dispatch found
	// the shard idle and a worker free, and prepared and submitted the job itself.
	Inline uint64
	// Submitted counts jobs given a worker: handed to the pool, or run by the caller of
	// DispatchRun on the fast path (RanInline).
	Submitted uint64
	// RanInline counts the jobs among Submitted whose Run DispatchRun called itself.
	RanInline uint64
}

// Stats returns a snapshot. It takes no lock; its only allocation is the Shards slice.
func (d *Dispatcher) Stats() Stats {
	st := Stats{
		Shards:     make([]ShardStats, len(d.shards)),
		Panics:     d.panics.Load(),
		FailPanics: d.failPanics.Load(),
	}
	for i := range d.shards {
		s := &d.shards[i]
		ss := ShardStats{
			Queued:    len(s.q),
			Ready:     int(s.readyLen.Load()),
			Overloads: s.overloads.Load(),
			Prepared:  s.prepared.Load(),
			Inline:    s.inline.Load(),
			Submitted: s.submitted.Load(),
			RanInline: s.ranInline.Load(),
		}
		st.Overloads += ss.Overloads
		st.Shards[i] = ss
	}
	for _, p := range d.pools {
		st.PoolCap += cap(p.sem)
		st.Busy += len(p.sem)
		st.Workers += p.ants.Running()
	}
	return st
}
