package workers

import (
	"errors"
	"fmt"
	"runtime"
	"time"
)

// Defaults applied to zero fields of Config.
const (
	// DefaultQueueDepth bounds each shard's queue of accepted, not yet prepared jobs.
	DefaultQueueDepth = 1024
	// DefaultPoolSize bounds concurrent Run calls. Run typically waits on a backend,
	// so this is a bound on in-flight backend work rather than on CPU use.
	DefaultPoolSize = 4096
	// DefaultIdleTimeout is how long an idle pool worker goroutine is kept.
	DefaultIdleTimeout = 10 * time.Second
	// DefaultRetryAfter is the retry hint carried by overload errors.
	DefaultRetryAfter = 100 * time.Millisecond
)

// Upper bounds checked by Validate: beyond them a value is a typo, not a setting.
const (
	maxShards     = 1 << 16
	maxQueueDepth = 1 << 20
	maxPoolSize   = 1 << 24 // ants keeps its capacity in an int32
)

// Config configures a Dispatcher. The zero value is usable: every zero field takes the
// default documented on it. Negative values are errors.
type Config struct {
	// Shards is the number of shards, each with one goroutine preparing its jobs in
	// order. More shards means less head-of-line blocking between unrelated sessions
	// and more parallel Prepare calls. Default: 4 × GOMAXPROCS.
	Shards int

	// QueueDepth is the capacity of each shard's queue. Dispatch fails with
	// ErrOverloaded when it is full. Default: DefaultQueueDepth.
	QueueDepth int

	// ReadyDepth is how many prepared jobs a shard may hold while waiting for a free
	// worker. While it has room the shard keeps preparing, so Prepare-only jobs
	// (notifications, cancellations) are not stuck behind a saturated pool.
	// Default: QueueDepth.
	ReadyDepth int

	// PoolSize is the maximum number of concurrent Run calls. With PoolPerShard it is
	// split evenly between shards (rounded up). Default: DefaultPoolSize.
	PoolSize int

	// PoolPerShard gives each shard its own pool instead of one shared pool. That
	// isolates shards from each other (one hot session cannot take every worker) at
	// the price of stranded capacity under uneven load and two housekeeping
	// goroutines per pool. Default false: one shared pool (see bench/RESULTS.md).
	PoolPerShard bool

	// IdleTimeout is how long an idle worker goroutine lives before the pool reaps it.
	// Default: DefaultIdleTimeout.
	IdleTimeout time.Duration

	// RetryAfter is the retry hint carried by overload errors (OverloadError.RetryAfter).
	// Default: DefaultRetryAfter.
	RetryAfter time.Duration

	// PanicHook, if set, is called for every panic the dispatcher recovers: from
	// Prepare or Run (after which the job gets Fail with the same *PanicError) and from
	// Fail itself. It runs on the goroutine that panicked and must not block; it is
	// where the router logs p.Stack. A panic in the hook is recovered and ignored.
	PanicHook func(p *PanicError)
}

// withDefaults returns c with every zero field replaced by its default.
func (c Config) withDefaults() Config {
	if c.Shards == 0 {
		c.Shards = 4 * runtime.GOMAXPROCS(0)
	}
	if c.QueueDepth == 0 {
		c.QueueDepth = DefaultQueueDepth
	}
	if c.ReadyDepth == 0 {
		c.ReadyDepth = c.QueueDepth
	}
	if c.PoolSize == 0 {
		c.PoolSize = DefaultPoolSize
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.RetryAfter == 0 {
		c.RetryAfter = DefaultRetryAfter
	}
	return c
}

// Validate reports every problem with c (defaults applied first), joined into one
// error, or nil.
func (c *Config) Validate() error {
	v := c.withDefaults()
	var errs []error
	check := func(name string, val, upper int) {
		if val < 1 || val > upper {
			errs = append(errs, fmt.Errorf("workers: %s = %d, want 1..%d (0 for the default)", name, val, upper))
		}
	}
	check("Shards", v.Shards, maxShards)
	check("QueueDepth", v.QueueDepth, maxQueueDepth)
	check("ReadyDepth", v.ReadyDepth, maxQueueDepth)
	check("PoolSize", v.PoolSize, maxPoolSize)
	if v.IdleTimeout < 0 {
		errs = append(errs, fmt.Errorf("workers: IdleTimeout = %v, want > 0 (0 for the default)", v.IdleTimeout))
	}
	if v.RetryAfter < 0 {
		errs = append(errs, fmt.Errorf("workers: RetryAfter = %v, want > 0 (0 for the default)", v.RetryAfter))
	}
	return errors.Join(errs...)
}

// pools returns the capacity of each pool and how many pools there are.
func (c Config) pools() (size, count int) {
	if !c.PoolPerShard {
		return c.PoolSize, 1
	}
	return (c.PoolSize + c.Shards - 1) / c.Shards, c.Shards
}
