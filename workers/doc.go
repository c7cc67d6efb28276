// Package workers is mcprouter's sharded per-session dispatcher: it decides where and
// when a unit of work runs, and refuses work it cannot take instead of queueing it
// without bound. It knows nothing about MCP, JSON-RPC framing or HTTP; the router
// gives it Jobs keyed by session and it gives them ordering, concurrency and
// backpressure.
//
// # Shape
//
// A Dispatcher owns a fixed number of shards. A key (a hash of the session id, see
// KeyOf) picks a shard. Each shard has a bounded queue and one goroutine that takes
// jobs off the queue in arrival order and calls Job.Prepare. A job whose Prepare
// returns true is handed to a bounded github.com/panjf2000/ants/v2 worker pool, where
// Job.Run executes concurrently with everything else.
//
// # Fast path
//
// Queueing costs a wake-up of the shard goroutine per job, which at tens of thousands
// of requests a second on one CPU is measurable. So when a shard is idle — nothing in
// its queue, no job being prepared by its goroutine, no prepared job waiting for a
// worker — and a worker is free, Dispatch does the shard's work itself: it reserves
// the worker, calls Prepare on the caller's goroutine and hands the job to the pool
// (or gives the worker back if Prepare returned false) before returning. Otherwise,
// including when another Dispatch holds the idle shard at that moment, it queues the
// job as described above. Only the goroutine that calls Prepare changes: the
// guarantees below hold for both paths and for any mix of them, because both run
// Prepare under the same per-shard lock and Dispatch takes the fast path only when no
// job dispatched before it is still waiting for its Prepare (the argument is written
// out on the unexported shard.tryInline). Callers must therefore not hold, across
// Dispatch, a lock their Prepare or Fail takes. Close turns the fast path off before
// it stops intake, and waits for a fast-path Prepare in progress as it waits for the
// shards. ShardStats.Inline counts the jobs that took it.
//
// A caller that would only wait for the job's answer anyway (an HTTP request's
// goroutine) may call DispatchRun instead: on the fast path it then runs Job.Run
// itself too, holding the worker it reserved, after the shard has been released, so the
// ordering below is the same. Close waits for these runs like any other;
// ShardStats.RanInline counts them. A job that learns only from its Prepare whether its
// Run may block the caller (a CallerRunner) goes to a worker when it says no.
//
// # Ordering guarantee
//
// For one key (more precisely, for one shard, so it holds for every key that maps to
// it): if Dispatch(k, a) returns nil before Dispatch(k, b) is called, then a.Prepare
// returns before b.Prepare starts, and everything a.Prepare wrote is visible to
// b.Prepare (happens-before). Job.Run of a happens after a.Prepare but is otherwise
// unordered: runs of one session may overlap each other and the Prepare of later jobs.
//
// That is the order MCP needs without serialising a session's requests:
//   - a request registers itself in the router's in-flight table in Prepare, so a later
//     notifications/cancelled that names it, handled entirely in its own Prepare,
//     always finds it (or finds it already finished);
//   - notifications/initialized is handled in Prepare, so it takes effect before the
//     Prepare of any request that arrives after it;
//   - long tool calls of one session still run in parallel.
//
// # Backpressure
//
// Every buffer is bounded. Run calls are limited by Config.PoolSize. A shard keeps
// preparing jobs while the pool is saturated, parking the prepared ones in a bounded
// ready list (Config.ReadyDepth), so notifications that only need Prepare — a cancel in
// particular — keep flowing while every worker is busy. When the ready list is full
// the shard stops taking from its queue, the queue (Config.QueueDepth) fills up, and
// Dispatch fails fast with an *OverloadError (errors.Is(err, ErrOverloaded)) carrying a
// retry hint. The package knows nothing of JSON-RPC: the router maps its errors.
//
// # Failure
//
// A panic in Prepare or Run is recovered by the dispatcher: the job gets Fail with a
// *PanicError (errors.Is(err, ErrPanic)), and the process keeps going. A panic in Fail
// is recovered and counted; Config.PanicHook sees them all. On the fast path all of
// that happens on the caller's goroutine before Dispatch returns (nil: the job was
// accepted, and has had its final call).
package workers
