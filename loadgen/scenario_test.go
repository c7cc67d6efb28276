package loadgen

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite golden files")

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
			golden := strings.TrimSuffix(path, ".yaml") + ".golden.json"
			if *update {
				if err := os.WriteFile(golden, append(got, '\n'), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(strings.TrimSpace(string(want)), string(got)); diff != "" {
				t.Errorf("config (-golden +got):\n%s", diff)
			}
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
	} {
		if _, err := ParseScenario([]byte(doc)); err == nil {
			t.Errorf("%q: no error", doc)
		}
	}
}

// FuzzScenario: the YAML front end never panics.
func FuzzScenario(f *testing.F) {
	names, _ := filepath.Glob(filepath.Join("testdata", "scenarios", "*.yaml"))
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		sc, err := ParseScenario(data)
		if err != nil {
			return
		}
		cfg := sc.Config("fuzz")
		_ = cfg.Validate()
	})
}
