package loadgen

import (
	"encoding/json"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"go.yaml.in/yaml/v3"

	"github.com/mcprouter/mcprouter/internal/golden"
)

// TestScenarioGolden parses every valid scenario, validates the resulting
// configuration and compares it with its golden JSON.
func TestScenarioGolden(t *testing.T) {
	for _, name := range []string{"steady", "fanout", "churn-stdio"} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join("testdata", "scenarios", name+".yaml")
			sc, err := LoadScenario(path)
			if err != nil {
				t.Fatal(err)
			}
			cfg := sc.Config(path)
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			got, err := json.MarshalIndent(struct {
				Config Config
				Assert []string
			}{cfg, sc.Assert}, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			golden.Check(t, strings.TrimSuffix(path, ".yaml")+".golden.json", append(got, '\n'))
		})
	}
}

func TestScenarioErrors(t *testing.T) {
	for _, name := range []string{"typo", "bad-duration"} {
		if _, err := LoadScenario(filepath.Join("testdata", "scenarios", name+".yaml")); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	for _, doc := range []string{
		"mix:\n  - tool: echo\n    wieght: 3\n",
		"mix:\n  - just-a-string\n",
		"sessions: many\n",
		"duration: 1e300\n", // seconds beyond int64 nanoseconds wrapped to a negative duration
		"warmup: 9.3e9\n",
		"ramp: -9.3e9\n",
	} {
		if _, err := ParseScenario([]byte(doc)); err == nil {
			t.Errorf("%q: no error", doc)
		}
	}
}

// FuzzScenario: whatever the YAML front end accepts round-trips: the scenario written
// back as YAML reads back as the same scenario, so no field is lost or misread on the
// way (and the run configuration built from it validates or fails, without a panic).
func FuzzScenario(f *testing.F) {
	for _, file := range golden.Inputs(f, filepath.Join("testdata", "scenarios", "*.yaml")) {
		f.Add(file.Data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		sc, err := ParseScenario(data)
		if err != nil {
			return
		}
		cfg := sc.Config("fuzz")
		if cfg.Validate() == nil && (!validRate(cfg.Rate) || !validRate(cfg.Fanout.Rate) ||
			cfg.Duration <= 0 || cfg.Timeout <= 0 || cfg.Ramp < 0 || cfg.Warmup < 0) {
			t.Fatalf("%q validated with rate %v, fan-out rate %v, duration %v, timeout %v, ramp %v, warm-up %v",
				data, cfg.Rate, cfg.Fanout.Rate, cfg.Duration, cfg.Timeout, cfg.Ramp, cfg.Warmup)
		}
		out, err := yaml.Marshal(sc)
		if err != nil {
			t.Fatalf("%q parsed but does not encode: %v", data, err)
		}
		back, err := ParseScenario(out)
		if err != nil {
			t.Fatalf("%q parsed, its encoding\n%s\ndoes not: %v", data, out, err)
		}
		if diff := cmp.Diff(sc, back, cmpopts.EquateEmpty(), cmpopts.EquateNaNs()); diff != "" {
			t.Fatalf("%q does not round-trip through\n%s\n(-parsed +re-parsed):\n%s", data, out, diff)
		}
	})
}

// validRate is a rate a run can pace: finite, not negative.
func validRate(r float64) bool { return r >= 0 && !math.IsInf(r, 0) }

// TestScenarioLabelsAndSlow: a mix entry's label and the slow threshold reach the run
// configuration; a label given twice, naming an unlabelled entry's tool, or that an
// --assert scope could not name, is refused.
func TestScenarioLabelsAndSlow(t *testing.T) {
	sc, err := ParseScenario([]byte("slow: 10ms\nmix:\n" +
		"  - {tool: sleep, args: {ms: 0}, weight: 49, label: fast}\n" +
		"  - {tool: sleep, args: {ms: 50}, label: stall}\n"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := sc.Config("stall.yaml")
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if cfg.Slow != 10*time.Millisecond {
		t.Errorf("slow %v, want 10ms", cfg.Slow)
	}
	want := []OpSpec{
		{Method: "tools/call", Tool: "sleep", Args: `{"ms":0}`, Weight: 49, Pages: 1, Label: "fast"},
		{Method: "tools/call", Tool: "sleep", Args: `{"ms":50}`, Weight: 1, Pages: 1, Label: "stall"},
	}
	if diff := cmp.Diff(want, cfg.Mix); diff != "" {
		t.Errorf("mix (-want +got):\n%s", diff)
	}
	for _, doc := range []string{
		"mix:\n  - {tool: a, label: x}\n  - {tool: b, label: x}\n",
		"mix:\n  - {method: ping, label: a}\n  - {tool: a}\n",
		"mix:\n  - {tool: a, label: 'fast calls'}\n",
		"mix:\n  - {tool: a, label: 'a<b'}\n",
		"slow: -1ms\n",
	} {
		sc, err := ParseScenario([]byte(doc))
		if err != nil {
			t.Fatalf("%q: %v", doc, err)
		}
		cfg := sc.Config("bad.yaml")
		if err := cfg.Validate(); err == nil {
			t.Errorf("%q validated", doc)
		}
	}
}
