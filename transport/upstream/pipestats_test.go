package upstream

import (
	"errors"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/internal/testwait"
)

// pipeFigures returns c's figures, failing the test when it has none.
func pipeFigures(t *testing.T, c Conn) PipeFigures {
	t.Helper()
	f, ok := Pipelining(c)
	if !ok {
		t.Fatal("an HTTP Conn has no pipelining figures")
	}
	return f
}

// wantFigures checks c's counters: pipelined, and pooled by reason (absent: 0).
func wantFigures(t *testing.T, c Conn, pipelined uint64, pooled map[PoolReason]uint64) {
	t.Helper()
	f := pipeFigures(t, c)
	var want [NumPoolReasons]uint64
	for r, n := range pooled {
		want[r] = n
	}
	if f.Pipelined != pipelined || f.Pooled != want {
		t.Errorf("pipelined %d, pooled %v; want %d, %v", f.Pipelined, f.Pooled, pipelined, want)
	}
}

// Each way a call can go is counted once, under its reason: the pipeline (and with
// PipelineShort only short kinds, only with others in flight) and the pool's four
// reasons, driven as the PipelineShort tests drive the mode.
func TestPipeStatsReasons(t *testing.T) {
	short := func(o HTTPOptions) HTTPOptions {
		o.PipelineShort, o.PipelineShortBound, o.CallTimes = true, time.Hour, knownShort("echo", "sleep")
		return o
	}
	lone := func(o HTTPOptions) HTTPOptions {
		o = short(o)
		o.PipelineLone = true
		return o
	}
	for _, tc := range []struct {
		name string
		opts HTTPOptions
		tool string // the tool called
		// off stops the pipeline as a backend that closes connections does.
		off       bool
		pipelined uint64
		pooled    map[PoolReason]uint64
	}{
		{"pipeline off", HTTPOptions{}, "echo", false, 0, map[PoolReason]uint64{PoolOff: 1}},
		{"every call", HTTPOptions{Pipeline: 1}, "echo", false, 1, nil},
		{"short kind", lone(HTTPOptions{}), "echo", false, 1, nil},
		{"stopped", lone(HTTPOptions{}), "echo", true, 0, map[PoolReason]uint64{PoolOff: 1}},
		{"alone", short(HTTPOptions{}), "echo", false, 0, map[PoolReason]uint64{PoolFewInFlight: 1}},
		{"unknown kind", lone(HTTPOptions{}), "new", false, 0, map[PoolReason]uint64{PoolNotShort: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := toolBackend(t, nil, nil)
			c, _ := dialHTTP(t, url, tc.opts)
			defer c.Close()
			if tc.off {
				c.pipe.off.Store(true)
			}
			send(t, c, msgCall(1, tc.tool, "x"))
			wantFigures(t, c, tc.pipelined, tc.pooled)
		})
	}
}

// A call that finds the one pipelined connection at its depth (behind a call the
// backend holds) takes the pool as full; the held call counts as pipelined.
func TestPipeStatsFull(t *testing.T) {
	held, release := make(chan struct{}), make(chan struct{})
	url := toolBackend(t, held, release)
	c, _ := dialHTTP(t, url, HTTPOptions{PipelineShort: true, PipelineShortBound: time.Hour, PipelineLone: true,
		Pipeline: 1, PipelineDepth: 1, CallTimes: knownShort("echo", "sleep")})
	defer c.Close()
	first := make(chan error, 1)
	go func() { first <- c.Send(testCtx(t), []byte(msgCall(1, "sleep", "hold"))) }()
	testwait.Recv(t, "the held call at the backend", waitLimit, held)
	send(t, c, msgCall(2, "echo", "x"))
	close(release)
	if err := <-first; err != nil {
		t.Fatalf("held call: %v", err)
	}
	wantFigures(t, c, 1, map[PoolReason]uint64{PoolFull: 1})
}

// The Conns that share a PipeStats add up in it; a StatelessConn reports its
// HTTPConn's.
func TestPipeStatsShared(t *testing.T) {
	url := toolBackend(t, nil, nil)
	stats := NewPipeStats()
	a, _ := dialHTTP(t, url, HTTPOptions{PipeStats: stats})
	defer a.Close()
	b, _ := dialHTTP(t, url, HTTPOptions{PipeStats: stats})
	defer b.Close()
	send(t, a, msgCall(1, "echo", "x"))
	send(t, b, msgCall(2, "echo", "x"))
	s, _ := Stateless(b)
	wantFigures(t, s, 0, map[PoolReason]uint64{PoolOff: 2})
}

// Only PipelineShort reports the router's wait, and it is saturated when the wait
// reaches the bound: always against a bound of 0, never against an hour.
func TestPipeStatsSaturated(t *testing.T) {
	url := toolBackend(t, nil, nil)
	for _, tc := range []struct {
		name      string
		opts      HTTPOptions
		short     bool
		saturated bool
	}{
		{"off", HTTPOptions{}, false, false},
		{"every call", HTTPOptions{Pipeline: 2}, false, false},
		{"short, bound 0", HTTPOptions{PipelineShort: true, PipelineShortBound: time.Nanosecond}, true, true},
		{"short, bound an hour", HTTPOptions{PipelineShort: true, PipelineShortBound: time.Hour}, true, false},
	} {
		c, _ := dialHTTP(t, url, tc.opts)
		f := pipeFigures(t, c)
		c.Close()
		if f.Short != tc.short || f.Saturated != tc.saturated || f.SchedWait < 0 || !tc.short && f.SchedWait != 0 {
			t.Errorf("%s: %+v, want short %v, saturated %v", tc.name, f, tc.short, tc.saturated)
		}
	}
}

// Transports that POST nothing through an HTTPConn have no figures.
func TestPipeStatsNotHTTP(t *testing.T) {
	if _, ok := Pipelining(nil); ok {
		t.Error("a nil Conn has figures")
	}
	if _, ok := Pipelining(&SSEConn{}); ok {
		t.Error("a legacy HTTP+SSE Conn has figures")
	}
}

// do's refusals are told from the call's own failures, each by its reason.
func TestPoolReasonOf(t *testing.T) {
	for err, want := range map[error]PoolReason{errPipelineOff: PoolOff, errNotShort: PoolNotShort, errPipelineFull: PoolFull} {
		if r, ok := poolReasonOf(err); !ok || r != want {
			t.Errorf("%v: %v %v, want %v", err, r, ok, want)
		}
	}
	if _, ok := poolReasonOf(errors.New("connection refused")); ok {
		t.Error("a failure counts as a reason for the pool")
	}
	if PoolReason(200).String() != "unknown" || PoolFewInFlight.String() != "few_in_flight" {
		t.Error("reason names")
	}
}

// Counting a call costs one atomic addition and no allocation.
func BenchmarkPipeStats(b *testing.B) {
	s := NewPipeStats()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			s.pool(PoolFewInFlight)
		}
	})
}
