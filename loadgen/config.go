// Package loadgen is mcpload as a library: it opens many MCP sessions against any MCP
// server or gateway, drives a weighted mix of calls at a closed-loop concurrency or an
// open-loop arrival rate, and measures latency per method and tool with
// coordinated-omission correction, throughput, errors by class and a per-second time
// series. It also watches itself: a run whose sends started late or whose own CPU was
// saturated is flagged, so that a number it prints can be trusted.
//
// Run takes a Config and returns a report.Report. The client transports live in
// loadgen/client, the measurement in loadgen/stats, the output formats in
// loadgen/report and the pass/fail expressions in loadgen/assert.
package loadgen

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/internal/defaults"
	"github.com/mcprouter/mcprouter/loadgen/client"
)

// Mode is the shape of the workload.
type Mode string

const (
	// Steady opens every session once and keeps it busy with the call mix.
	Steady Mode = "steady"
	// Churn measures session lifecycles: each operation connects (initialize +
	// initialized), makes ChurnCalls calls from the mix and closes the session.
	Churn Mode = "churn"
	// Fanout subscribes every session to one resource, triggers updates of it at
	// Fanout.Rate from one extra session and measures, per subscriber, how long each
	// notifications/resources/updated takes to arrive.
	Fanout Mode = "fanout"
)

// Config describes a run. The zero value of every field except the target has a
// working default; Validate fills them in.
type Config struct {
	// Target is where and how to connect.
	Target client.Options
	// Sessions is the number of concurrent sessions (the concurrency in closed loop,
	// the pool that carries the arrivals in open loop). Default 16.
	Sessions int
	// Ramp spreads the session openings over this long. The ramp is never measured:
	// the clock starts once every session is open.
	Ramp time.Duration
	// Warmup is run at full load after the ramp and excluded from the figures.
	Warmup time.Duration
	// Duration is the measured window. Default 10s.
	Duration time.Duration
	// Rate, when positive, selects open loop: operations are started at this constant
	// rate per second whether or not earlier ones have finished, and latency is
	// measured from each one's intended start. Zero means closed loop: every session
	// starts its next operation as soon as the previous one finishes.
	Rate float64
	// Timeout bounds each call (and each handshake). Default 10s.
	Timeout time.Duration
	// Mode is Steady (default), Churn or Fanout.
	Mode Mode
	// Mix is the weighted call mix. Default: ping.
	Mix []OpSpec
	// ChurnCalls is the number of calls per session lifecycle in churn mode. Default 1.
	ChurnCalls int
	// Fanout configures fan-out mode.
	Fanout FanoutSpec
	// LateThreshold is how late an open-loop send may start before it counts as late.
	// Default 1ms.
	LateThreshold time.Duration
	// Seed makes the random choices (mix, template values) repeatable. Default 1.
	Seed uint64
	// Shards is the number of recorder shards. Default 2 × GOMAXPROCS.
	Shards int
	// Name labels the run in reports (for example the scenario file name).
	Name string
	// Slow, when positive, is a latency threshold: the report counts, overall and per
	// method and entry, the successful operations whose corrected latency was at or
	// over it (the tail as a count, not only as percentiles).
	Slow time.Duration
}

// FanoutSpec configures fan-out mode.
type FanoutSpec struct {
	// URI is the resource every session subscribes to.
	URI string `yaml:"uri"`
	// Trigger is the call that makes the server update URI (for example a tool of a
	// test server). It is sent from one extra session.
	Trigger OpSpec `yaml:"trigger"`
	// Rate is the number of triggers per second. Default 10. Each subscriber's
	// notifications are matched to the triggers in order.
	Rate float64 `yaml:"rate"`
	// Grace is how long to wait for outstanding deliveries after the last trigger.
	// Default: Timeout, at most 5s.
	Grace time.Duration `yaml:"-"`
}

// OpSpec is one entry of the call mix.
type OpSpec struct {
	// Method is the JSON-RPC method: tools/call (implied by Tool), resources/read
	// (implied by URI), prompts/get (implied by Prompt), tools/list, resources/list,
	// resources/templates/list, prompts/list, ping, completion/complete or any other
	// method with Params.
	Method string `yaml:"method"`
	// Tool is the tool to call.
	Tool string `yaml:"tool"`
	// Prompt is the prompt to get.
	Prompt string `yaml:"prompt"`
	// URI is the resource to read (a template: "file:///data/{{rand 1 100}}").
	URI string `yaml:"uri"`
	// Args is the arguments object of a tool call or prompt, as a JSON template.
	Args string `yaml:"args"`
	// Params is the whole params object for other methods, as a JSON template.
	Params string `yaml:"params"`
	// Weight is the relative frequency in the mix. Default 1.
	Weight int `yaml:"weight"`
	// Pages is, for */list methods, how many pages one operation walks by following
	// nextCursor: 1 by default, -1 for all (at most 1000).
	Pages int `yaml:"pages"`
	// Label, when given, names the entry in the report's per-entry breakdown (by_tool)
	// and gives it a histogram of its own, so that two entries calling the same tool
	// with different arguments (a fast call and a slow one) are reported apart.
	// Unique within a mix. Without it, entries making the same call share one.
	Label string `yaml:"label"`
}

// maxPages bounds a "walk every page" list operation against a server whose cursors
// never end.
const maxPages = 1000

// Call names the call the entry makes: "tools/call echo", "ping".
func (o OpSpec) Call() string {
	switch {
	case o.Tool != "":
		return "tools/call " + o.Tool
	case o.Prompt != "":
		return "prompts/get " + o.Prompt
	case o.URI != "":
		return "resources/read " + o.URI
	}
	return o.Method
}

// normalize infers Method and checks the spec.
func (o *OpSpec) normalize() error {
	implied := ""
	switch {
	case o.Tool != "":
		implied = "tools/call"
	case o.Prompt != "":
		implied = "prompts/get"
	case o.URI != "" && o.Method != "resources/subscribe":
		implied = "resources/read"
	}
	if o.Method == "" {
		o.Method = implied
	}
	if o.Method == "" {
		return errors.New("mix entry without method, tool, prompt or uri")
	}
	if implied != "" && o.Method != implied {
		return fmt.Errorf("mix entry %q: method %s does not go with tool/prompt/uri", o.Call(), o.Method)
	}
	if o.Weight == 0 {
		o.Weight = 1
	}
	if o.Weight < 0 {
		return fmt.Errorf("mix entry %q: negative weight", o.Call())
	}
	if o.Pages == 0 {
		o.Pages = 1
	}
	if o.Pages < 0 || o.Pages > maxPages {
		o.Pages = maxPages
	}
	if o.Args != "" && o.Method != "tools/call" && o.Method != "prompts/get" {
		return fmt.Errorf("mix entry %q: args are for tools/call and prompts/get; use params", o.Call())
	}
	if o.Params != "" && (o.Tool != "" || o.Prompt != "" || o.URI != "") {
		return fmt.Errorf("mix entry %q: params conflicts with tool/prompt/uri", o.Call())
	}
	return nil
}

// paramsTemplate builds the params template text.
func (o *OpSpec) paramsTemplate() string {
	switch o.Method {
	case "tools/call", "prompts/get":
		name := o.Tool
		if o.Method == "prompts/get" {
			name = o.Prompt
		}
		args := o.Args
		if args == "" {
			args = "{}"
		}
		return `{"name":` + string(codec.AppendString(nil, name)) + `,"arguments":` + args + `}`
	case "resources/read", "resources/subscribe", "resources/unsubscribe":
		return `{"uri":` + quoteTemplate(o.URI) + `}`
	}
	return o.Params
}

// quoteTemplate quotes s as a JSON string while leaving its placeholders intact
// (placeholders contain nothing that needs escaping).
func quoteTemplate(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	rest := s
	for rest != "" {
		i := strings.Index(rest, "{{")
		if i < 0 {
			i = len(rest)
		}
		q := codec.AppendString(nil, rest[:i])
		b.Write(q[1 : len(q)-1])
		rest = rest[i:]
		if rest == "" {
			break
		}
		j := strings.Index(rest, "}}")
		if j < 0 {
			q := codec.AppendString(nil, rest)
			b.Write(q[1 : len(q)-1])
			break
		}
		b.WriteString(rest[:j+2])
		rest = rest[j+2:]
	}
	b.WriteByte('"')
	return b.String()
}

// Validate fills in defaults and checks the configuration.
func (c *Config) Validate() error {
	c.Sessions = defaults.Positive(c.Sessions, 16)
	c.Duration = defaults.Positive(c.Duration, 10*time.Second)
	c.Timeout = defaults.Positive(c.Timeout, 10*time.Second)
	if c.Ramp < 0 || c.Warmup < 0 {
		return errors.New("ramp and warm-up cannot be negative")
	}
	if !(c.Rate >= 0) || math.IsInf(c.Rate, 1) { // NaN fails every comparison
		return errors.New("rate must be a finite number, not negative")
	}
	// Checked in every mode: a scenario may carry a fan-out section its mode does not
	// use, and a number that is no rate is a mistake wherever it stands.
	if !(c.Fanout.Rate >= 0) || math.IsInf(c.Fanout.Rate, 1) {
		return errors.New("fan-out rate must be a finite number, not negative (0: 10 a second)")
	}
	c.LateThreshold = defaults.Positive(c.LateThreshold, time.Millisecond)
	c.Seed = cmp.Or(c.Seed, 1)
	c.Mode = cmp.Or(c.Mode, Steady)
	c.ChurnCalls = defaults.Positive(c.ChurnCalls, 1)
	switch c.Mode {
	case Steady, Churn:
	case Fanout:
		if c.Fanout.URI == "" {
			return errors.New("fan-out mode needs a resource URI")
		}
		if c.Fanout.Trigger.Method == "" && c.Fanout.Trigger.Tool == "" {
			return errors.New("fan-out mode needs a trigger call (for example a tool that updates the resource)")
		}
		if err := c.Fanout.Trigger.normalize(); err != nil {
			return fmt.Errorf("fan-out trigger: %w", err)
		}
		if c.Fanout.Rate == 0 {
			c.Fanout.Rate = 10
		}
		c.Fanout.Grace = defaults.Positive(c.Fanout.Grace, min(c.Timeout, 5*time.Second))
		if c.Target.Transport == client.Stdio {
			return errors.New("fan-out mode over stdio would need one trigger per process; use http or sse")
		}
		// The stateless revision has no GET stream: its subscribers hold
		// subscriptions/listen streams instead.
		c.Target.Stream = c.Target.Protocol != client.Version20260728
	default:
		return fmt.Errorf("unknown mode %q (steady, churn, fanout)", c.Mode)
	}
	if c.Slow < 0 {
		return errors.New("the slow threshold cannot be negative (0: not counted)")
	}
	if len(c.Mix) == 0 && c.Mode != Fanout {
		c.Mix = []OpSpec{{Method: "ping"}}
	}
	total := 0
	for i := range c.Mix {
		if err := c.Mix[i].normalize(); err != nil {
			return err
		}
		total += c.Mix[i].Weight
	}
	if total == 0 && c.Mode != Fanout {
		return errors.New("every mix weight is zero")
	}
	return checkLabels(c.Mix)
}

// checkLabels refuses a label given twice, or one that is the tool of an unlabelled
// entry: either would merge two entries' figures under one key of the breakdown; and
// one with white space or a comparison sign, which an --assert scope could not name
// (an assertion is read with its spaces taken out, and split at its operator).
func checkLabels(mix []OpSpec) error {
	tools := map[string]bool{}
	for _, o := range mix {
		if o.Label == "" && o.Tool != "" {
			tools[o.Tool] = true
		}
	}
	seen := map[string]bool{}
	for _, o := range mix {
		switch {
		case o.Label == "":
		case strings.ContainsFunc(o.Label, unicode.IsSpace) || strings.ContainsAny(o.Label, "<>=!"):
			return fmt.Errorf("mix entry %q: label %q has white space or one of <>=! (an --assert scope could not name it)", o.Call(), o.Label)
		case seen[o.Label]:
			return fmt.Errorf("mix entry %q: label %q given twice (labels are unique within a mix)", o.Call(), o.Label)
		case tools[o.Label]:
			return fmt.Errorf("mix entry %q: label %q is the tool of an unlabelled entry", o.Call(), o.Label)
		}
		seen[o.Label] = true
	}
	return nil
}
