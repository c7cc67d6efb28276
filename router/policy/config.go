package policy

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/mcprouter/mcprouter/internal/defaults"
)

// Config is the `policy:` section of mcprouter's configuration. The zero value has no
// rules and no limits: every request of an authenticated principal is allowed.
//
//	policy:
//	  rules:
//	    - allow: 'principal.sub == "alice"'
//	    - name: bob-echo
//	      allow: 'principal.sub == "bob" && mcp.tool == "ref__echo"'
//	    - deny: 'mcp.tool == "ref__fail" && !("admin" in principal.scopes)'
//	  limits:
//	    - name: per-principal
//	      key: principal
//	      rate: 100            # operations per `per` (default 1s)
//	      burst: 200
//	    - match: 'mcp.method == "tools/call"'
//	      key: [principal, tool]
//	      rate: 10
//	  audit: true
type Config struct {
	// Rules are the allow and deny rules, in order. Order only decides which rule a
	// decision names when several match: a deny always wins over an allow.
	Rules []Rule `yaml:"rules"`
	// Limits are token buckets: a request is admitted when every limit whose match it
	// satisfies has a token for its key.
	Limits []Limit `yaml:"limits"`
	// Audit writes a log line for every decided call; denials and limited requests are
	// always logged.
	Audit bool `yaml:"audit"`
	// SyncInterval is how often an instance publishes its rate-limit consumption to the
	// others (cluster-wide limits, see Sync). Default 100ms.
	SyncInterval time.Duration `yaml:"sync_interval"`
	// ViewCache bounds the cache of the list filter and of the decisions: entries in
	// all, each the visibility of one item or the decision of one call (method, name,
	// backend) for one principal view. When full, the least recently used views go.
	// Default 262144.
	ViewCache int `yaml:"view_cache"`
}

// Rule is one allow or deny rule: a CEL expression of type bool over the variables
// principal.sub, principal.iss, principal.scopes, principal.claims, mcp.method,
// mcp.backend, mcp.tool, mcp.prompt, mcp.uri and mcp.arguments. Exactly one of Allow and
// Deny is set.
type Rule struct {
	// Name names the rule in errors, denials and logs; default "rules[<index>]".
	Name  string `yaml:"name"`
	Allow string `yaml:"allow"`
	Deny  string `yaml:"deny"`
}

// Limit is one rate limit: a token bucket per key.
type Limit struct {
	// Name names the limit in errors, logs and between instances; default
	// "limits[<index>]". Instances share consumption by name and key.
	Name string `yaml:"name"`
	// Match selects the requests the limit counts, a CEL expression over the rules'
	// variables; empty counts every request.
	Match string `yaml:"match"`
	// Key says what gets its own bucket: any of principal, method, backend, tool, prompt
	// and uri, alone or combined (a list, or one string "principal+tool"). Empty: one
	// bucket for every request the limit matches.
	Key KeyParts `yaml:"key"`
	// Rate is how many requests the bucket admits per Per, sustained.
	Rate float64 `yaml:"rate"`
	// Per is the period of Rate; default 1s.
	Per time.Duration `yaml:"per"`
	// Burst is how many requests the bucket admits at once; default Rate rounded up
	// (at least 1).
	Burst int `yaml:"burst"`
	// MaxKeys bounds the limit's key table; default 100000. Idle keys (buckets full
	// again) are dropped first; see Limiter.
	MaxKeys int `yaml:"max_keys"`
}

// KeyPart is one component of a limit's key.
type KeyPart uint8

// The key components a limit may use.
const (
	KeyPrincipal KeyPart = iota + 1 // the principal's identity (issuer and subject)
	KeyMethod                       // mcp.method
	KeyBackend                      // mcp.backend
	KeyTool                         // mcp.tool
	KeyPrompt                       // mcp.prompt
	KeyURI                          // mcp.uri
)

var keyPartNames = [...]string{KeyPrincipal: "principal", KeyMethod: "method", KeyBackend: "backend", KeyTool: "tool", KeyPrompt: "prompt", KeyURI: "uri"}

func (k KeyPart) String() string {
	if int(k) < len(keyPartNames) && k != 0 {
		return keyPartNames[k]
	}
	return fmt.Sprintf("KeyPart(%d)", k)
}

// KeyParts is a limit's key: a YAML list of part names, or one string joining them
// with '+'.
type KeyParts []KeyPart

// UnmarshalYAML implements yaml.Unmarshaler.
func (k *KeyParts) UnmarshalYAML(n *yaml.Node) error {
	var names []string
	switch n.Kind {
	case yaml.ScalarNode:
		if n.Value != "" {
			names = strings.Split(n.Value, "+")
		}
	case yaml.SequenceNode:
		if err := n.Decode(&names); err != nil {
			return err
		}
	default:
		return fmt.Errorf("line %d: key: a list of principal, method, backend, tool, prompt, uri, or one string joining them with +", n.Line)
	}
	parts := make(KeyParts, 0, len(names))
	for _, s := range names {
		p := parseKeyPart(strings.TrimSpace(s))
		if p == 0 {
			return fmt.Errorf("line %d: key: unknown part %q (principal, method, backend, tool, prompt, uri)", n.Line, s)
		}
		parts = append(parts, p)
	}
	*k = parts
	return nil
}

// MarshalYAML writes the key as a list of names.
func (k KeyParts) MarshalYAML() (any, error) {
	names := make([]string, len(k))
	for i, p := range k {
		names[i] = p.String()
	}
	return names, nil
}

func parseKeyPart(s string) KeyPart {
	for i, n := range keyPartNames {
		if n != "" && n == s {
			return KeyPart(i)
		}
	}
	return 0
}

// Defaults of Config.
const (
	DefaultSyncInterval = 100 * time.Millisecond
	DefaultViewCache    = 1 << 18
	DefaultMaxKeys      = 100000
)

// withDefaults returns c with the zero values replaced by the defaults.
func (c Config) withDefaults() Config {
	c.SyncInterval = defaults.Positive(c.SyncInterval, DefaultSyncInterval)
	c.ViewCache = defaults.Positive(c.ViewCache, DefaultViewCache)
	c.Rules = append([]Rule(nil), c.Rules...)
	for i := range c.Rules {
		if c.Rules[i].Name == "" {
			c.Rules[i].Name = fmt.Sprintf("rules[%d]", i)
		}
	}
	c.Limits = append([]Limit(nil), c.Limits...)
	for i := range c.Limits {
		l := &c.Limits[i]
		if l.Name == "" {
			l.Name = fmt.Sprintf("limits[%d]", i)
		}
		l.Per = defaults.Positive(l.Per, time.Second)
		if l.Burst <= 0 && l.Rate > 0 && l.Rate < math.MaxInt32 {
			l.Burst = max(1, int(math.Ceil(l.Rate)))
		}
		l.MaxKeys = defaults.Positive(l.MaxKeys, DefaultMaxKeys)
	}
	return c
}

// ConfigError is a configuration error that names its place: the section, the index and
// name of the rule or limit, the key, and for a CEL expression the line and column
// (1-based) in it.
type ConfigError struct {
	Section string // "rules" or "limits"
	Index   int
	Name    string // the rule's or limit's name as configured ("" if none)
	Key     string // allow, deny, match, rate...
	Line    int    // in the expression; 0 when not about a position
	Column  int
	Msg     string
}

func (e *ConfigError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "policy.%s[%d]", e.Section, e.Index)
	if e.Name != "" {
		fmt.Fprintf(&b, " (%s)", e.Name)
	}
	if e.Key != "" {
		b.WriteString(".")
		b.WriteString(e.Key)
	}
	if e.Line > 0 {
		fmt.Fprintf(&b, " at %d:%d", e.Line, e.Column)
	}
	b.WriteString(": ")
	b.WriteString(e.Msg)
	return b.String()
}

// Validate checks c without building an Engine, CEL expressions included: every
// problem is reported (errors.Join of *ConfigError), not only the first.
func (c *Config) Validate() error {
	_, err := compileConfig(c.withDefaults(), *c)
	return err
}

// validateShape checks what does not need CEL; the compiler checks the expressions.
func validateShape(c Config, raw Config) []error {
	var errs []error
	if raw.SyncInterval < 0 {
		errs = append(errs, errors.New("policy.sync_interval: must not be negative"))
	}
	if raw.ViewCache < 0 {
		errs = append(errs, errors.New("policy.view_cache: must not be negative"))
	}
	for i, r := range raw.Rules {
		bad := func(key, msg string) {
			errs = append(errs, &ConfigError{Section: "rules", Index: i, Name: r.Name, Key: key, Msg: msg})
		}
		switch {
		case r.Allow == "" && r.Deny == "":
			bad("", "needs allow or deny (a CEL expression)")
		case r.Allow != "" && r.Deny != "":
			bad("", "has both allow and deny: one rule says one thing")
		}
		if r.Name != "" && dupName(raw.Rules[:i], func(o Rule) string { return o.Name }, r.Name) {
			bad("name", "another rule has this name")
		}
	}
	for i, l := range raw.Limits {
		bad := func(key, msg string) {
			errs = append(errs, &ConfigError{Section: "limits", Index: i, Name: l.Name, Key: key, Msg: msg})
		}
		if !(l.Rate > 0) || math.IsInf(l.Rate, 0) {
			bad("rate", "must be a positive number of requests per `per`")
		}
		if l.Per < 0 {
			bad("per", "must not be negative")
		}
		if l.Burst < 0 {
			bad("burst", "must not be negative")
		}
		if l.MaxKeys < 0 {
			bad("max_keys", "must not be negative")
		}
		seen := KeyParts{}
		for _, p := range l.Key {
			if p == 0 || int(p) >= len(keyPartNames) {
				bad("key", fmt.Sprintf("unknown part %d", p))
			} else if dupName(seen, KeyPart.String, p.String()) {
				bad("key", fmt.Sprintf("%s appears twice", p))
			}
			seen = append(seen, p)
		}
		if dupName(c.Limits[:i], func(o Limit) string { return o.Name }, c.Limits[i].Name) {
			bad("name", "another limit has this name (instances share consumption by name)")
		}
	}
	return errs
}

func dupName[T any](prev []T, name func(T) string, n string) bool {
	for _, p := range prev {
		if name(p) == n {
			return true
		}
	}
	return false
}
