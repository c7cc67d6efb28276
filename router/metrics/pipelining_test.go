package metrics

import (
	"maps"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
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

// The status page's share of pipelined calls is over the interval, per backend, and
// per instance: an instance whose figures are missing from a reading (its shared
// session down) neither takes its calls out of its backend's share then nor puts them
// all back at its return.
func TestPipelinedShare(t *testing.T) {
	http := func(addr string, piped, pooled uint64) fleet.InstanceStats {
		in := fleet.InstanceStats{Backend: "api", Addr: addr, HTTP: true}
		in.Pipelining.Pipelined = piped
		in.Pipelining.Pooled[upstream.PoolFewInFlight] = pooled
		return in
	}
	down := func(addr string) fleet.InstanceStats { return fleet.InstanceStats{Backend: "api", Addr: addr} }
	tools := fleet.InstanceStats{Backend: "tools", Index: 1, Addr: "tool#0"}
	steps := []struct {
		name string
		in   []fleet.InstanceStats
		want []float64 // api, tools
	}{
		{"first reading: from zero", []fleet.InstanceStats{http("a", 30, 10), http("b", 0, 0), tools}, []float64{0.75, 0}},
		{"both", []fleet.InstanceStats{http("a", 60, 10), http("b", 0, 30), tools}, []float64{0.5, 0}},
		{"b down", []fleet.InstanceStats{http("a", 70, 10), down("b"), tools}, []float64{1, 0}},
		{"b back", []fleet.InstanceStats{http("a", 80, 10), http("b", 0, 40), tools}, []float64{0.5, 0}},
		{"no calls", []fleet.InstanceStats{http("a", 80, 10), http("b", 0, 40), tools}, []float64{0, 0}},
		{"b replaced by a reload: from the next reading", []fleet.InstanceStats{http("a", 90, 10), http("b", 0, 5), tools}, []float64{1, 0}},
		{"c added: from the next reading", []fleet.InstanceStats{http("a", 90, 20), http("b", 0, 5), http("c", 50, 0), tools}, []float64{0, 0}},
		{"after", []fleet.InstanceStats{http("a", 90, 20), http("b", 10, 5), http("c", 60, 0), tools}, []float64{1, 0}},
	}
	var prev reading
	for _, step := range steps {
		st := Status{Backends: make([]BackendStatus, 2)}
		var cur reading
		addInstances(&st, &cur, &prev, func(fn func(fleet.InstanceStats)) {
			for _, in := range step.in {
				fn(in)
			}
		})
		got := []float64{st.Backends[0].Pipelined, st.Backends[1].Pipelined}
		if diff := cmp.Diff(step.want, got); diff != "" {
			t.Errorf("%s: shares (-want +got):\n%s", step.name, diff)
		}
		if st.Backends[0].Instances != len(step.in)-1 || st.Backends[1].Instances != 1 {
			t.Errorf("%s: instances %d and %d", step.name, st.Backends[0].Instances, st.Backends[1].Instances)
		}
		prev = cur
	}
}
