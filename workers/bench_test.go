package workers

import (
	"context"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/panjf2000/ants/v2"
)

// The benchmarks measure end to end: an op is one job dispatched, prepared and (when
// it has a Run) run on a worker, and the clock stops when the last job is done. Jobs
// are trivial so the figures are the dispatcher's own cost. Producers are
// b.RunParallel goroutines (GOMAXPROCS of them), each keeping at most benchWindow
// jobs outstanding, as a client with bounded concurrency would: a producer that
// reaches its window parks until one of its jobs finishes, so nobody spins and the
// queues never refuse (refused/op reports it if they do). Baselines run the same
// windowed load straight into one ants pool of the same size, and into a fresh
// goroutine per job.

const benchWindow = 32

// windowJob is a stateless job shared by every op of one producer: tokens holds one
// entry per outstanding job, and the job's last call takes one back.
type windowJob struct {
	run    bool
	tokens chan struct{}
}

func (j *windowJob) Prepare() bool {
	if !j.run {
		<-j.tokens
	}
	return j.run
}
func (j *windowJob) Run()         { <-j.tokens }
func (j *windowJob) Fail(_ error) { <-j.tokens }

// acquire parks until the producer may have one more job outstanding.
func (j *windowJob) acquire() { j.tokens <- struct{}{} }

// drain waits until every job of the producer has finished, bounded by patience.
func (j *windowJob) drain() bool {
	timeout := time.NewTimer(patience)
	defer timeout.Stop()
	for range cap(j.tokens) {
		select {
		case j.tokens <- struct{}{}:
		case <-timeout.C:
			return false
		}
	}
	return true
}

func benchShardCounts() []int {
	return []int{1, 4, 4 * runtime.GOMAXPROCS(0)}
}

func BenchmarkDispatch(b *testing.B) {
	for _, m := range modes {
		for _, run := range []bool{true, false} {
			for _, shards := range benchShardCounts() {
				name := m.name + "/run=" + strconv.FormatBool(run) + "/shards=" + strconv.Itoa(shards)
				b.Run(name, func(b *testing.B) {
					benchDispatch(b, Config{Shards: shards, PoolSize: 64, PoolPerShard: m.perShard}, run)
				})
			}
		}
	}
}

func benchDispatch(b *testing.B, cfg Config, run bool) {
	d, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	var refused, base atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		j := &windowJob{run: run, tokens: make(chan struct{}, benchWindow)}
		key := uint64(base.Add(1)) << 32
		var mine int64
		for pb.Next() {
			key++
			j.acquire()
			for d.Dispatch(key, j) != nil {
				mine++
				runtime.Gosched()
			}
		}
		if !j.drain() {
			b.Error("jobs did not finish")
		}
		refused.Add(mine)
	})
	b.StopTimer()
	b.ReportMetric(float64(refused.Load())/float64(b.N), "refused/op")
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	if err := d.Close(ctx); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkDispatchLatency gives Run a simulated backend latency (a 100µs sleep), so
// throughput is bounded by how many workers a key can use: the shared pool against
// per-shard pools, with load spread over many keys or all on one.
func BenchmarkDispatchLatency(b *testing.B) {
	for _, m := range modes {
		for _, spread := range []bool{true, false} {
			name := m.name + "/keys=" + map[bool]string{true: "many", false: "one"}[spread]
			b.Run(name, func(b *testing.B) {
				d, err := New(Config{Shards: 8, PoolSize: 64, PoolPerShard: m.perShard})
				if err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					j := &sleepJob{windowJob{run: true, tokens: make(chan struct{}, benchWindow)}}
					var key uint64
					for pb.Next() {
						if spread {
							key++
						}
						j.acquire()
						if err := dispatchRetry(d, key, j); err != nil {
							b.Error(err)
							return
						}
					}
					if !j.drain() {
						b.Error("jobs did not finish")
					}
				})
				b.StopTimer()
				ctx, cancel := context.WithTimeout(context.Background(), patience)
				defer cancel()
				if err := d.Close(ctx); err != nil {
					b.Fatal(err)
				}
			})
		}
	}
}

// BenchmarkRoundTrip is the round trip a request makes through the router: its handler
// dispatches a job and waits until the job's Run, on a pool worker, hands it the reply.
// Each producer (a b.RunParallel goroutine with a key of its own) has one request in
// flight at a time, so shards are mostly idle between requests, which is when the fast
// path applies. path=queued turns the fast path off: every job goes through the shard
// goroutine, as it did before the fast path existed. path=fast is Dispatch's default
// behaviour. path=caller dispatches with DispatchRun, which on the fast path runs Run
// on the producer too. With run=false the job is a notification: Prepare signals and there is no
// Run. shards=default is Config's default, 4 × GOMAXPROCS. Run it with -cpu 1 too: the
// router runs with GOMAXPROCS=1 in the load benchmark that matters.
func BenchmarkRoundTrip(b *testing.B) {
	for _, run := range []bool{true, false} {
		for _, shards := range []int{1, 0} {
			for _, path := range []string{"queued", "fast", "caller"} {
				name := "run=" + strconv.FormatBool(run) + "/shards=" + map[bool]string{true: "1", false: "default"}[shards == 1] +
					"/path=" + path
				b.Run(name, func(b *testing.B) {
					benchRoundTrip(b, Config{Shards: shards, PoolSize: 64}, run, path)
				})
			}
		}
	}
}

// roundTripJob is a request whose handler waits on reply.
type roundTripJob struct {
	run   bool
	reply chan struct{} // 1-buffered, as the handler's wake-up channel
}

func (j *roundTripJob) Prepare() bool {
	if !j.run {
		j.reply <- struct{}{}
	}
	return j.run
}
func (j *roundTripJob) Run()         { j.reply <- struct{}{} }
func (j *roundTripJob) Fail(_ error) { j.reply <- struct{}{} }

func benchRoundTrip(b *testing.B, cfg Config, run bool, path string) {
	d, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	if path == "queued" {
		queuedOnly(d)
	}
	dispatch := d.Dispatch
	if path == "caller" {
		dispatch = d.DispatchRun
	}
	var base atomic.Uint64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		j := &roundTripJob{run: run, reply: make(chan struct{}, 1)}
		key := base.Add(1)
		for pb.Next() {
			if err := dispatch(key, j); err != nil { // one in flight: never refused
				b.Error(err)
				return
			}
			<-j.reply
		}
	})
	b.StopTimer()
	var prepared, inline uint64
	for _, s := range d.Stats().Shards {
		prepared += s.Prepared
		inline += s.Inline
	}
	b.ReportMetric(float64(inline)/float64(prepared), "inline/op")
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	if err := d.Close(ctx); err != nil {
		b.Fatal(err)
	}
}

// sleepJob is a windowJob whose Run waits like a backend call would.
type sleepJob struct{ windowJob }

func (j *sleepJob) Run() {
	time.Sleep(100 * time.Microsecond)
	j.windowJob.Run()
}

// BenchmarkBaselineAnts hands the same load straight to one ants pool of the same
// size: what the dispatcher costs on top of the pool it feeds.
func BenchmarkBaselineAnts(b *testing.B) {
	p, err := ants.NewPoolWithFuncGeneric(64, func(j *windowJob) { j.Run() })
	if err != nil {
		b.Fatal(err)
	}
	defer p.Release()
	runBaseline(b, p.Invoke)
}

// BenchmarkBaselineGo starts a goroutine per job: the unbounded design the dispatcher
// replaces.
func BenchmarkBaselineGo(b *testing.B) {
	runBaseline(b, func(j *windowJob) error {
		go j.Run()
		return nil
	})
}

// runBaseline is the producers' loop of the baselines, the same as the dispatcher's
// benchmarks but without keys: each producer hands its jobs to start, keeping at most
// benchWindow of them outstanding.
func runBaseline(b *testing.B, start func(*windowJob) error) {
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		j := &windowJob{run: true, tokens: make(chan struct{}, benchWindow)}
		for pb.Next() {
			j.acquire()
			if err := start(j); err != nil {
				b.Error(err)
				return
			}
		}
		if !j.drain() {
			b.Error("jobs did not finish")
		}
	})
}

// BenchmarkDispatchOverloaded measures the refusal path: the cost of saying no.
func BenchmarkDispatchOverloaded(b *testing.B) {
	d, err := New(Config{Shards: 1, QueueDepth: 1, ReadyDepth: 1, PoolSize: 1})
	if err != nil {
		b.Fatal(err)
	}
	gate := make(chan struct{})
	blocker := &funcJob{run: func() {
		select {
		case <-gate:
		case <-time.After(patience):
		}
	}}
	filler := &countJob{run: true}
	if err := d.Dispatch(0, blocker); err != nil {
		b.Fatal(err)
	}
	waitFor(b, "the blocker", func() bool { return d.Stats().Busy == 1 })
	_ = dispatchRetry(d, 0, filler)
	waitFor(b, "a ready job", func() bool { return d.Stats().Shards[0].Ready == 1 })
	_ = dispatchRetry(d, 0, filler)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if d.Dispatch(0, filler) == nil {
				b.Error("accepted while full")
				return
			}
		}
	})
	b.StopTimer()
	close(gate)
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	if err := d.Close(ctx); err != nil {
		b.Fatal(err)
	}
}
