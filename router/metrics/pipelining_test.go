package metrics

import (
	"maps"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcprouter/mcprouter/internal/testmetrics"
	"github.com/mcprouter/mcprouter/router/fleet"
	"github.com/mcprouter/mcprouter/transport/upstream"
)

// instancesOnly exports, through m's descriptions, the per-instance metrics of fixed
// instance figures, as collectFleet does for a fleet's.
type instancesOnly struct {
	m  *Metrics
	in []fleet.InstanceStats
}

func (c instancesOnly) Describe(ch chan<- *prometheus.Desc) { c.m.Describe(ch) }

func (c instancesOnly) Collect(ch chan<- prometheus.Metric) {
	c.m.collectInstances(ch, func(fn func(fleet.InstanceStats)) {
		for _, in := range c.in {
			fn(in)
		}
	})
}

// instancePipelining is a fixed set of instances: two HTTP replicas of api, one
// pipeline: auto and saturated, the other pipeline: off; a stdio instance of tools,
// which has no pipelining figures.
func instancePipelining() []fleet.InstanceStats {
	auto := upstream.PipeFigures{Pipelined: 90, Short: true, SchedWait: 2 * time.Millisecond, Saturated: true}
	auto.Pooled[upstream.PoolFewInFlight] = 5
	auto.Pooled[upstream.PoolNotShort] = 3
	auto.Pooled[upstream.PoolFull] = 2
	var off upstream.PipeFigures
	off.Pooled[upstream.PoolOff] = 7
	return []fleet.InstanceStats{
		{Backend: "api", Addr: "http://a/mcp", Healthy: true, HTTP: true, Pipelining: auto},
		{Backend: "api", Addr: "http://b/mcp", Healthy: true, HTTP: true, Pipelining: off},
		{Backend: "tools", Addr: "tool#0", Healthy: true},
	}
}

// TestCollectPipelining: pipelined and pooled calls per HTTP instance, with every
// reason (0 included), saturation for the pipeline: auto instance alone, the scheduler
// wait once; nothing of them for an instance that does not POST over HTTP.
func TestCollectPipelining(t *testing.T) {
	m := New(Options{Backends: []string{"api", "tools"}})
	got := seriesOf(t, only(instancesOnly{m, instancePipelining()}))
	want := map[string]float64{
		"mcprouter_backend_pipelined_calls_total,backend=api,instance=http://a/mcp":                   90,
		"mcprouter_backend_pooled_calls_total,backend=api,instance=http://a/mcp,reason=off":           0,
		"mcprouter_backend_pooled_calls_total,backend=api,instance=http://a/mcp,reason=few_in_flight": 5,
		"mcprouter_backend_pooled_calls_total,backend=api,instance=http://a/mcp,reason=not_short":     3,
		"mcprouter_backend_pooled_calls_total,backend=api,instance=http://a/mcp,reason=full":          2,
		"mcprouter_backend_pipeline_saturated,backend=api,instance=http://a/mcp":                      1,
		"mcprouter_backend_pipelined_calls_total,backend=api,instance=http://b/mcp":                   0,
		"mcprouter_backend_pooled_calls_total,backend=api,instance=http://b/mcp,reason=off":           7,
		"mcprouter_backend_pooled_calls_total,backend=api,instance=http://b/mcp,reason=few_in_flight": 0,
		"mcprouter_backend_pooled_calls_total,backend=api,instance=http://b/mcp,reason=not_short":     0,
		"mcprouter_backend_pooled_calls_total,backend=api,instance=http://b/mcp,reason=full":          0,
		"mcprouter_scheduler_wait_seconds":                                                            0.002,
		"mcprouter_backend_instance_up,backend=tools,instance=tool#0":                                 1,
	}
	testmetrics.Expect(t, got, want)
	for key := range maps.Keys(got) {
		switch key {
		case "mcprouter_backend_pipeline_saturated,backend=api,instance=http://b/mcp",
			"mcprouter_backend_pipelined_calls_total,backend=tools,instance=tool#0":
			t.Errorf("%s exported", key)
		}
	}
	noAuto := pedantic(t, only(instancesOnly{m, instancePipelining()[1:]}))
	if n := len(testmetrics.Series(t, noAuto, "mcprouter_scheduler_wait_seconds")); n != 0 {
		t.Errorf("the scheduler wait exported without a pipeline: auto instance (%d series)", n)
	}
	lint(t, instancesOnly{m, instancePipelining()})
}

// The status page's share of pipelined calls is over the interval, per backend.
func TestPipelinedShare(t *testing.T) {
	prev := backendReading{piped: 10, pooled: 10}
	for _, c := range []struct {
		cur  backendReading
		want float64
	}{
		{backendReading{piped: 40, pooled: 20}, 0.75},
		{backendReading{piped: 10, pooled: 10}, 0},
		{backendReading{piped: 5, pooled: 30}, 0}, // counters went back
	} {
		if got := c.cur.pipelinedShare(&prev); got != c.want {
			t.Errorf("%+v after %+v: share %v, want %v", c.cur, prev, got, c.want)
		}
	}
	var b backendReading
	for _, in := range instancePipelining()[:2] {
		b.addPipelining(&in.Pipelining)
	}
	if b.piped != 90 || b.pooled != 17 {
		t.Errorf("summed %+v, want 90 pipelined, 17 pooled", b)
	}
}
