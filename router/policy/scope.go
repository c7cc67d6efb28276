package policy

import (
	"fmt"
	"slices"
)

// Scope is what one MCP endpoint (a virtual server) exposes of the router's backends:
// the backends it serves and, among their tools and prompts, those whose exposed name
// matches Include (any of it; empty: every name) and no pattern of Exclude. Resources
// and resource templates are selected by backend alone. The zero Scope exposes
// everything.
//
// An engine with a Scope applies it before its rules: a call outside it is denied
// (ReasonScope) and its item is hidden from lists, so a virtual server's lists,
// list_changed notifications and calls all follow the selection through the same paths
// as the rules.
type Scope struct {
	Backends []string
	// Include and Exclude are glob patterns over the whole exposed name: * matches any
	// run of characters (slashes included), ? one byte, anything else itself.
	Include []string
	Exclude []string
}

// Empty reports whether s exposes everything.
func (s *Scope) Empty() bool {
	return len(s.Backends) == 0 && len(s.Include) == 0 && len(s.Exclude) == 0
}

// Validate reports the first pattern that cannot be a name's pattern (an empty one),
// naming its key as key.include[i] or key.exclude[i].
func (s *Scope) Validate(key string) error {
	for _, l := range []struct {
		name string
		pats []string
	}{{"include", s.Include}, {"exclude", s.Exclude}} {
		for i, p := range l.pats {
			if p == "" {
				return fmt.Errorf("%s.%s[%d]: an empty pattern matches no name", key, l.name, i)
			}
		}
	}
	for i, b := range s.Backends {
		if b == "" {
			return fmt.Errorf("%s.backends[%d]: empty backend name", key, i)
		}
	}
	return nil
}

// scope is a Scope ready to answer: nil exposes everything.
type scope struct {
	backends map[string]bool // nil: every backend
	include  []string
	exclude  []string
}

func newScope(s Scope) *scope {
	if s.Empty() {
		return nil
	}
	sc := &scope{include: slices.Clone(s.Include), exclude: slices.Clone(s.Exclude)}
	if len(s.Backends) > 0 {
		sc.backends = make(map[string]bool, len(s.Backends))
		for _, b := range s.Backends {
			sc.backends[b] = true
		}
	}
	return sc
}

// admits reports whether in is within the scope: its backend is served and the tool or
// prompt it names is selected.
func (sc *scope) admits(in *Input) bool {
	if sc.backends != nil && !sc.backends[in.Backend] {
		return false
	}
	switch {
	case in.Tool != "":
		return sc.selects(in.Tool)
	case in.Prompt != "":
		return sc.selects(in.Prompt)
	}
	return true
}

// selects applies Include and Exclude to an exposed name.
func (sc *scope) selects(name string) bool {
	if len(sc.include) > 0 && !slices.ContainsFunc(sc.include, func(p string) bool { return glob(p, name) }) {
		return false
	}
	return !slices.ContainsFunc(sc.exclude, func(p string) bool { return glob(p, name) })
}

// glob matches name against pattern (* any run, ? one byte), iteratively: the last *
// seen is where a mismatch resumes, so the cost is linear in practice and never
// exponential.
func glob(pattern, name string) bool {
	p, n := 0, 0
	star, mark := -1, 0
	for n < len(name) {
		switch {
		case p < len(pattern) && (pattern[p] == '?' || pattern[p] == name[n]):
			p++
			n++
		case p < len(pattern) && pattern[p] == '*':
			star, mark = p, n
			p++
		case star >= 0:
			p = star + 1
			mark++
			n = mark
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}
