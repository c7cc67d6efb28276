package loadgen

import (
	"fmt"
	"math/rand/v2"
	"sort"

	"github.com/mcprouter/mcprouter/loadgen/client"
	"github.com/mcprouter/mcprouter/loadgen/internal/wire"
	"github.com/mcprouter/mcprouter/loadgen/stats"
)

// compiledOp is an OpSpec ready to send: templates parsed, recorder slot assigned.
type compiledOp struct {
	spec   OpSpec
	method string
	params *Template // nil: no params
	name   *Template // Mcp-Name value (tool, prompt or URI), nil if none
	tool   bool
	pages  int
	stat   int
	// uriParams: params are {"uri":<name>}, built from the filled-in name so that the
	// body and the Mcp-Name header carry the same random values.
	uriParams bool
}

func compileOp(o OpSpec) (*compiledOp, error) {
	c := &compiledOp{spec: o, method: o.Method, tool: o.Method == "tools/call", pages: o.Pages}
	if o.URI != "" {
		t, err := ParseTemplate(o.URI)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", o.Call(), err)
		}
		c.name, c.uriParams = t, true
		if !isList(o.Method) {
			c.pages = 1
		}
		return c, nil
	}
	if src := o.paramsTemplate(); src != "" {
		t, err := ParseTemplate(src)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", o.Call(), err)
		}
		if err := checkJSON(t, o.Call()+" params"); err != nil {
			return nil, err
		}
		c.params = t
	}
	if name := o.Tool + o.Prompt; name != "" {
		// Tool and prompt names are literal; only their arguments are templates.
		c.name = &Template{src: name, parts: []tplPart{{lit: name}}}
	}
	if !isList(o.Method) {
		c.pages = 1
	}
	return c, nil
}

func isList(method string) bool {
	switch method {
	case "tools/list", "resources/list", "resources/templates/list", "prompts/list":
		return true
	}
	return false
}

// compile builds the mix and registers every recorded operation.
func (r *run) compile() error {
	var ops []stats.Op
	add := func(method, name string, primary bool) int {
		ops = append(ops, stats.Op{Method: method, Name: name, Primary: primary})
		return len(ops) - 1
	}
	r.connectOp, r.closeOp, r.cycleOp, r.subscribeOp, r.triggerOp, r.deliveryOp = -1, -1, -1, -1, -1, -1
	r.connectOp = add("connect", "", false)
	mixPrimary := r.cfg.Mode == Steady
	seen := map[string]int{}
	total := 0
	for _, spec := range r.cfg.Mix {
		c, err := compileOp(spec)
		if err != nil {
			return err
		}
		// Unlabelled entries making the same call share a histogram; a labelled one
		// has its own (labels are unique, and never a call's name).
		key := spec.Call()
		if spec.Label != "" {
			key = "label " + spec.Label
		}
		if idx, ok := seen[key]; ok {
			c.stat = idx
		} else {
			name := spec.Tool + spec.Prompt
			if name == "" {
				name = spec.URI
			}
			c.stat = add(spec.Method, name, mixPrimary)
			ops[c.stat].Entry = entryKey(spec)
			seen[key] = c.stat
		}
		total += spec.Weight
		r.mix = append(r.mix, c)
		r.cum = append(r.cum, total)
	}
	switch r.cfg.Mode {
	case Churn:
		r.closeOp = add("close", "", false)
		r.cycleOp = add("session", "", true)
	case Fanout:
		sub := "resources/subscribe"
		if r.cfg.Target.Protocol == client.Version20260728 {
			sub = "subscriptions/listen"
		}
		r.subscribeOp = add(sub, "", false)
		r.triggerOp = add("trigger", r.cfg.Fanout.Trigger.Call(), false)
		r.deliveryOp = add("delivery", r.cfg.Fanout.URI, true)
	}
	shards := r.cfg.Shards
	if shards <= 0 {
		shards = defaultShards()
	}
	r.rec = stats.New(ops, shards)
	return nil
}

// entryKey is where the report's per-entry breakdown lists a mix entry: under its
// label, or under its tool when it has none; other unlabelled calls are not listed.
func entryKey(spec OpSpec) string {
	if spec.Label != "" {
		return spec.Label
	}
	if spec.Method == "tools/call" {
		return spec.Tool
	}
	return ""
}

// pick chooses a mix entry by weight.
func (r *run) pick(rng *rand.Rand) *compiledOp {
	if len(r.mix) == 1 {
		return r.mix[0]
	}
	v := rng.IntN(r.cum[len(r.cum)-1])
	return r.mix[sort.SearchInts(r.cum, v+1)]
}

// newRand returns the random source of stream i of the run.
func newRand(seed, stream uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, stream*0x9E3779B97F4A7C15+1))
}

func toolError(result []byte) bool    { return wire.ToolError(result) }
func nextCursor(result []byte) []byte { return wire.NextCursor(result) }
func appendMember(dst, obj []byte, key string, raw []byte) []byte {
	return wire.AppendMember(dst, obj, key, raw)
}
