package loadgen

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/mcprouter/mcprouter/loadgen/client"
)

// Scenario is the YAML form of a run (a file passed with --scenario):
//
//	target:
//	  url: http://127.0.0.1:8080/mcp
//	  transport: http          # http, sse or stdio
//	  protocol: 2025-11-25
//	  command: [./server, --stdio]   # stdio only
//	  headers: {Authorization: Bearer xyz}
//	  stream: true             # hold the GET stream open
//	sessions: 64
//	ramp: 5s
//	warmup: 5s
//	duration: 30s
//	rate: 2000                 # omit for closed loop
//	mix:
//	  - tool: echo
//	    args: {text: "hello {{seq}}"}
//	    weight: 8
//	  - tool: echo               # the same tool with other arguments, reported apart
//	    args: {text: "{{randstr 4000}}"}
//	    label: echo-large
//	  - method: tools/list
//	    pages: -1
//	  - uri: "test://r/{{rand 0 9}}"
//	slow: 10ms                 # count the calls that took 10 ms or more
//	assert: ["p99<5ms", "errors<0.1%"]
//
// Durations are Go durations ("500ms", "30s") or plain seconds. Unknown keys are
// errors, so that a typo cannot silently change a benchmark.
type Scenario struct {
	Target        ScenarioTarget `yaml:"target"`
	Sessions      int            `yaml:"sessions"`
	Ramp          Duration       `yaml:"ramp"`
	Warmup        Duration       `yaml:"warmup"`
	Duration      Duration       `yaml:"duration"`
	Rate          float64        `yaml:"rate"`
	Timeout       Duration       `yaml:"timeout"`
	Mode          Mode           `yaml:"mode"`
	Mix           []OpSpec       `yaml:"mix"`
	ChurnCalls    int            `yaml:"churn_calls"`
	Fanout        FanoutSpec     `yaml:"fanout"`
	LateThreshold Duration       `yaml:"late_threshold"`
	Slow          Duration       `yaml:"slow"`
	Seed          uint64         `yaml:"seed"`
	Assert        []string       `yaml:"assert"`
}

// ScenarioTarget is the target section of a scenario.
type ScenarioTarget struct {
	URL string `yaml:"url"`
	// URLs are further instances of the same service (client.Options.URLs).
	URLs      []string          `yaml:"urls"`
	Transport string            `yaml:"transport"`
	Protocol  string            `yaml:"protocol"`
	Command   []string          `yaml:"command"`
	Env       []string          `yaml:"env"`
	Headers   map[string]string `yaml:"headers"`
	Stream    bool              `yaml:"stream"`
}

// Duration is a time.Duration that reads from YAML as "1.5s" or as seconds.
type Duration time.Duration

// UnmarshalYAML implements yaml.Unmarshaler.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if v, err := strconv.ParseFloat(n.Value, 64); err == nil {
		// Beyond ±292 years (or NaN) the conversion would wrap to a negative duration,
		// which a run then replaces with its default: refuse it instead.
		if !(math.Abs(v) < float64(math.MaxInt64)/float64(time.Second)) {
			return fmt.Errorf("line %d: duration %q out of range", n.Line, n.Value)
		}
		*d = Duration(v * float64(time.Second))
		return nil
	}
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: bad duration %q", n.Line, n.Value)
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML writes d as a Go duration ("1.5s"), which UnmarshalYAML reads back.
func (d Duration) MarshalYAML() (any, error) { return time.Duration(d).String(), nil }

// UnmarshalYAML lets args and params be written as YAML mappings (converted to JSON)
// or as JSON template strings.
func (o *OpSpec) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: a mix entry is a mapping", n.Line)
	}
	// Node.Decode does not reject unknown keys; a typo must not go unnoticed.
	for i := 0; i+1 < len(n.Content); i += 2 {
		switch k := n.Content[i]; k.Value {
		case "method", "tool", "prompt", "uri", "args", "params", "weight", "pages", "label":
		default:
			return fmt.Errorf("line %d: unknown mix key %q", k.Line, k.Value)
		}
	}
	var raw struct {
		Method string    `yaml:"method"`
		Tool   string    `yaml:"tool"`
		Prompt string    `yaml:"prompt"`
		URI    string    `yaml:"uri"`
		Weight int       `yaml:"weight"`
		Pages  int       `yaml:"pages"`
		Label  string    `yaml:"label"`
		Args   yaml.Node `yaml:"args"`
		Params yaml.Node `yaml:"params"`
	}
	if err := n.Decode(&raw); err != nil {
		return err
	}
	*o = OpSpec{Method: raw.Method, Tool: raw.Tool, Prompt: raw.Prompt, URI: raw.URI, Weight: raw.Weight, Pages: raw.Pages, Label: raw.Label}
	var err error
	if o.Args, err = jsonText(&raw.Args); err != nil {
		return err
	}
	o.Params, err = jsonText(&raw.Params)
	return err
}

// jsonText turns a YAML node into JSON text: strings are taken as written (a JSON
// template), mappings and sequences are converted.
func jsonText(n *yaml.Node) (string, error) {
	switch n.Kind {
	case 0:
		return "", nil
	case yaml.ScalarNode:
		if n.Tag == "!!str" || n.Tag == "" {
			return n.Value, nil
		}
	}
	var v any
	if err := n.Decode(&v); err != nil {
		return "", err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("line %d: %w", n.Line, err)
	}
	return string(b), nil
}

// ParseScenario decodes a scenario document.
func ParseScenario(data []byte) (*Scenario, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var s Scenario
	if err := dec.Decode(&s); err != nil {
		return nil, err
	}
	return &s, nil
}

// LoadScenario reads a scenario file.
func LoadScenario(path string) (*Scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	s, err := ParseScenario(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// Config converts the scenario into a run configuration (not yet validated). name
// labels the run, typically the file name.
func (s *Scenario) Config(name string) Config {
	return Config{
		Target: client.Options{
			Transport: s.Target.Transport, URL: s.Target.URL, URLs: s.Target.URLs, Command: s.Target.Command, Env: s.Target.Env,
			Protocol: s.Target.Protocol, Headers: s.Target.Headers, Stream: s.Target.Stream,
		},
		Sessions: s.Sessions, Ramp: time.Duration(s.Ramp), Warmup: time.Duration(s.Warmup),
		Duration: time.Duration(s.Duration), Rate: s.Rate, Timeout: time.Duration(s.Timeout), Mode: s.Mode,
		Mix: s.Mix, ChurnCalls: s.ChurnCalls, Fanout: s.Fanout, LateThreshold: time.Duration(s.LateThreshold),
		Seed: s.Seed, Name: filepath.Base(name), Slow: time.Duration(s.Slow),
	}
}
