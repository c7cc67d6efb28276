// Command gen writes the params package's tables (tables_gen.go) from the specification's
// JSON schemas in testdata/<revision>/schema.json: for every request and notification of
// every revision, the rule its params must follow. It runs from the package directory:
//
//	go generate ./router/params
//
// The schemas are compiled to what the validator checks on the wire, nothing more: the
// JSON kinds a value may have (type), the allowed strings (const, enum), the members of an
// object (properties, required, additionalProperties), the elements of an array (items),
// alternatives (anyOf, oneOf: told apart by kind, and objects by a const member such as
// "type"), and allOf's merged members. Formats, bounds and patterns are not checked. A
// definition reached again inside itself (JSONValue in JSONObject) is cut to its kinds.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"go/format"
	"log"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Revisions, oldest first; their index is the revision's index in the tables.
var revisions = []string{"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"}

// JSON kinds, as the package's kind bits.
const (
	kString = 1 << iota
	kInteger
	kFraction // a number that is not an integer
	kBoolean
	kNull
	kObject
	kArray
)

var kindNames = map[string]int{
	"string": kString, "integer": kInteger, "number": kInteger | kFraction,
	"boolean": kBoolean, "null": kNull, "object": kObject, "array": kArray,
}

// rule is a compiled schema; its fields mirror the package's rule type, with table
// indices for the rules it refers to (0 is the rule that accepts anything).
type rule struct {
	Kinds   int
	Enum    []string
	Members []member
	Extra   int // rule of the members not listed (additionalProperties)
	Items   int
	Tag     string // objects: the member whose value picks one of Tagged
	Tagged  []alt
	Default int   // the alternative when Tag is absent (index into Tagged, plus one), 0 none
	AnyOf   []int // alternatives with disjoint kinds, picked by the value's kind
}

type member struct {
	Name     string
	Required bool
	Rule     int
}

type alt struct {
	Value string
	Rule  int
}

type method struct {
	name     string
	params   int
	required bool // the method's params member is required
}

type compiler struct {
	defs     map[string]any
	rules    []rule
	index    map[string]int // key of a rule -> its index in rules
	inside   map[string]bool
	defIndex map[string]int
}

func (c *compiler) intern(r rule) int {
	key, _ := json.Marshal(r)
	if i, ok := c.index[string(key)]; ok {
		return i
	}
	c.rules = append(c.rules, r)
	c.index[string(key)] = len(c.rules) - 1
	return len(c.rules) - 1
}

// compile compiles the schema s and returns its rule's index.
func (c *compiler) compile(s any) int {
	m, ok := s.(map[string]any)
	if !ok {
		return 0
	}
	if ref, ok := m["$ref"].(string); ok {
		name := ref[strings.LastIndex(ref, "/")+1:]
		if i, ok := c.defIndex[name]; ok {
			return i
		}
		def := c.defs[name]
		if def == nil {
			log.Fatalf("unresolved %s", ref)
		}
		if c.inside[name] {
			// Recursion: the inner occurrence is checked for its kinds only.
			return c.intern(rule{Kinds: kindsOf(def.(map[string]any))})
		}
		c.inside[name] = true
		i := c.compile(def)
		delete(c.inside, name)
		c.defIndex[name] = i
		return i
	}
	for _, k := range []string{"anyOf", "oneOf"} {
		if alts, ok := m[k].([]any); ok {
			return c.union(alts)
		}
	}
	if all, ok := m["allOf"].([]any); ok {
		return c.allOf(all)
	}
	var r rule
	r.Kinds = kindsOf(m)
	if v, ok := m["const"]; ok {
		if sv, ok := v.(string); ok {
			r.Enum = []string{sv}
			r.Kinds |= kString
		}
	}
	if vs, ok := m["enum"].([]any); ok {
		for _, v := range vs {
			if sv, ok := v.(string); ok {
				r.Enum = append(r.Enum, sv)
			}
		}
		if len(r.Enum) != len(vs) {
			r.Enum = nil // not all strings: left to the kinds
		} else {
			r.Kinds |= kString
		}
	}
	if props, ok := m["properties"].(map[string]any); ok {
		req := map[string]bool{}
		for _, n := range asList(m["required"]) {
			req[n.(string)] = true
		}
		names := make([]string, 0, len(props))
		for n := range props {
			names = append(names, n)
		}
		slices.Sort(names)
		for _, n := range names {
			r.Members = append(r.Members, member{n, req[n], c.compile(props[n])})
		}
		// A required member the schema does not describe (none so far) must still be there.
		for _, n := range asList(m["required"]) {
			if props[n.(string)] == nil {
				r.Members = append(r.Members, member{n.(string), true, 0})
			}
		}
		if len(r.Members) > 64 {
			log.Fatalf("more than 64 members: %v", names)
		}
	}
	if ap, ok := m["additionalProperties"].(map[string]any); ok && len(ap) > 0 {
		r.Extra = c.compile(ap)
	}
	if it, ok := m["items"].(map[string]any); ok {
		r.Items = c.compile(it)
	}
	if r.Kinds == 0 && (r.Members != nil || r.Extra != 0) {
		r.Kinds = kObject
	}
	if r.Kinds == 0 && r.Items != 0 {
		r.Kinds = kArray
	}
	return c.intern(r)
}

func asList(v any) []any { l, _ := v.([]any); return l }

// kindsOf reads type (a name or a list of names); 0 when the schema has none.
func kindsOf(m map[string]any) int {
	k := 0
	switch t := m["type"].(type) {
	case string:
		k = kindNames[t]
	case []any:
		for _, n := range t {
			k |= kindNames[n.(string)]
		}
	}
	return k
}

// union compiles anyOf/oneOf: the alternatives' rules grouped by kind; several objects
// become one rule tagged by a member every one of them sets to its own constant, or,
// failing that, a plain object; several of another kind merge to that kind alone.
func (c *compiler) union(schemas []any) int {
	var objs, others []int
	var add func(i int)
	add = func(i int) {
		r := c.rules[i]
		switch {
		case r.Tag != "":
			for _, a := range r.Tagged {
				objs = append(objs, a.Rule)
			}
		case r.AnyOf != nil:
			for _, a := range r.AnyOf {
				add(a)
			}
		case r.Kinds == kObject:
			objs = append(objs, i)
		default:
			others = append(others, i)
		}
	}
	for _, s := range schemas {
		i := c.compile(s)
		if c.rules[i].Kinds == 0 {
			return 0 // an alternative accepts anything
		}
		add(i)
	}
	var alts []int
	if len(objs) == 1 {
		alts = append(alts, objs[0])
	} else if len(objs) > 1 {
		alts = append(alts, c.tagged(objs))
	}
	for _, i := range others {
		merged := false
		for j, a := range alts {
			if c.rules[a].Kinds&c.rules[i].Kinds != 0 {
				alts[j] = c.intern(rule{Kinds: c.rules[a].Kinds | c.rules[i].Kinds})
				merged = true
				break
			}
		}
		if !merged {
			alts = append(alts, i)
		}
	}
	if len(alts) == 1 {
		return alts[0]
	}
	// Alternatives that check nothing but their kinds are one rule with those kinds.
	plain := true
	kinds := 0
	for _, a := range alts {
		kinds |= c.rules[a].Kinds
		r := c.rules[a]
		plain = plain && r.Enum == nil && r.Members == nil && r.Extra == 0 && r.Items == 0 && r.Tagged == nil
	}
	if plain {
		return c.intern(rule{Kinds: kinds})
	}
	slices.SortFunc(alts, func(a, b int) int { return c.rules[a].Kinds - c.rules[b].Kinds })
	return c.intern(rule{Kinds: kinds, AnyOf: alts})
}

// tagged makes one rule of object alternatives told apart by a member each sets to its
// own constant ("type": "ref/prompt"); at most one may leave it out (the default).
func (c *compiler) tagged(objs []int) int {
	first := c.rules[objs[0]]
	for _, cand := range first.Members {
		var r rule
		r.Kinds, r.Tag = kObject, cand.Name
		seen := map[string]bool{}
		ok := true
		for _, o := range objs {
			var m *member
			for k := range c.rules[o].Members {
				if c.rules[o].Members[k].Name == cand.Name {
					m = &c.rules[o].Members[k]
				}
			}
			if m == nil || len(c.rules[m.Rule].Enum) != 1 || seen[c.rules[m.Rule].Enum[0]] {
				ok = false
				break
			}
			v := c.rules[m.Rule].Enum[0]
			seen[v] = true
			r.Tagged = append(r.Tagged, alt{v, o})
			if !m.Required {
				if r.Default != 0 {
					ok = false
					break
				}
				r.Default = len(r.Tagged)
			}
		}
		if ok {
			return c.intern(r)
		}
	}
	return c.intern(rule{Kinds: kObject})
}

// allOf merges the members of object alternatives.
func (c *compiler) allOf(schemas []any) int {
	r := rule{Kinds: kObject}
	for _, s := range schemas {
		a := c.rules[c.compile(s)]
		if a.Kinds != kObject || a.AnyOf != nil || a.Tagged != nil {
			return c.intern(rule{Kinds: kObject})
		}
		for _, m := range a.Members {
			if i := slices.IndexFunc(r.Members, func(x member) bool { return x.Name == m.Name }); i >= 0 {
				r.Members[i].Required = r.Members[i].Required || m.Required
				continue
			}
			r.Members = append(r.Members, m)
		}
	}
	slices.SortFunc(r.Members, func(a, b member) int { return strings.Compare(a.Name, b.Name) })
	return c.intern(r)
}

// withMeta adds _meta, optional, to the params rule params when it does not describe
// it: every message extends the base Request or Notification, whose params reserve
// _meta (with progressToken for requests), but the older schemas repeat that only in
// the base. The base is Request's or Notification's params, or RequestParams or
// NotificationParams in the revisions that name them.
func (c *compiler) withMeta(params int, notification bool) int {
	base, named := "Request", "RequestParams"
	if notification {
		base, named = "Notification", "NotificationParams"
	}
	var meta any
	if d, ok := c.defs[base].(map[string]any); ok {
		meta = dig(d, "properties", "params", "properties", "_meta")
	}
	if meta == nil {
		if d, ok := c.defs[named].(map[string]any); ok {
			meta = dig(d, "properties", "_meta")
		}
	}
	r := c.rules[params]
	if meta == nil || (r.Kinds != 0 && r.Kinds != kObject) || r.AnyOf != nil {
		return params
	}
	if r.Tag != "" {
		r.Tagged = slices.Clone(r.Tagged)
		for i := range r.Tagged {
			r.Tagged[i].Rule = c.withMeta(r.Tagged[i].Rule, notification)
		}
		return c.intern(r)
	}
	if slices.ContainsFunc(r.Members, func(m member) bool { return m.Name == "_meta" }) {
		return params
	}
	r.Kinds = kObject
	r.Members = append(slices.Clone(r.Members), member{"_meta", false, c.compile(meta)})
	slices.SortFunc(r.Members, func(a, b member) int { return strings.Compare(a.Name, b.Name) })
	return c.intern(r)
}

// dig returns the value at the path of keys in nested JSON objects, or nil.
func dig(v any, keys ...string) any {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

// methods compiles the params of every message that has a constant method.
func (c *compiler) methods() []method {
	byName := map[string]method{}
	var defNames []string
	for n := range c.defs {
		defNames = append(defNames, n)
	}
	slices.Sort(defNames)
	for _, dn := range defNames {
		d, _ := c.defs[dn].(map[string]any)
		props, _ := d["properties"].(map[string]any)
		mp, _ := props["method"].(map[string]any)
		name, ok := mp["const"].(string)
		if !ok {
			continue
		}
		// The unions of all client or server messages (ClientNotification) repeat a
		// message defined on its own.
		if _, dup := byName[name]; dup && (strings.HasPrefix(dn, "Client") || strings.HasPrefix(dn, "Server")) {
			continue
		}
		m := method{name: name}
		if p, ok := props["params"]; ok {
			m.params = c.compile(p)
		}
		m.params = c.withMeta(m.params, strings.HasSuffix(dn, "Notification"))
		for _, r := range asList(d["required"]) {
			m.required = m.required || r == "params"
		}
		byName[name] = m
	}
	return slices.SortedFunc(maps.Values(byName), func(a, b method) int { return strings.Compare(a.name, b.name) })
}

func main() {
	dir := flag.String("dir", ".", "package directory (testdata/ in, tables_gen.go out)")
	outPath := flag.String("out", "", "file to write (default: tables_gen.go in -dir)")
	flag.Parse()
	if *outPath == "" {
		*outPath = filepath.Join(*dir, "tables_gen.go")
	}
	c := &compiler{index: map[string]int{}}
	c.intern(rule{}) // 0: anything
	perRev := make([][]method, len(revisions))
	for i, rev := range revisions {
		raw, err := os.ReadFile(filepath.Join(*dir, "testdata", rev, "schema.json"))
		if err != nil {
			log.Fatal(err)
		}
		var doc map[string]any
		if err := json.Unmarshal(raw, &doc); err != nil {
			log.Fatalf("%s: %v", rev, err)
		}
		defs, _ := doc["$defs"].(map[string]any)
		if defs == nil {
			defs, _ = doc["definitions"].(map[string]any)
		}
		c.defs, c.inside, c.defIndex = defs, map[string]bool{}, map[string]int{}
		perRev[i] = c.methods()
	}
	src := c.emit(perRev)
	out, err := format.Source(src)
	if err != nil {
		os.Stdout.Write(src)
		log.Fatal(err)
	}
	if err := os.WriteFile(*outPath, out, 0o644); err != nil {
		log.Fatal(err)
	}
}

func (c *compiler) emit(perRev [][]method) []byte {
	var b bytes.Buffer
	b.WriteString("// Code generated by internal/gen from testdata/*/schema.json; DO NOT EDIT.\n\npackage params\n\n")
	b.WriteString("// revisions are the revisions the tables cover, oldest first.\nvar revisions = [...]string{")
	for _, r := range revisions {
		fmt.Fprintf(&b, "%q, ", r)
	}
	b.WriteString("}\n\n")
	b.WriteString("// rules are every rule of every revision, shared where equal; rules[0] accepts anything.\n")
	b.WriteString("var rules = [...]rule{\n")
	for i, r := range c.rules {
		fmt.Fprintf(&b, "%d: {kinds: %s", i, kindExpr(r.Kinds))
		if r.Enum != nil {
			fmt.Fprintf(&b, ", enum: %#v", r.Enum)
		}
		if r.Members != nil {
			b.WriteString(", members: []member{")
			for _, m := range r.Members {
				fmt.Fprintf(&b, "{%q, %v, %d}, ", m.Name, m.Required, m.Rule)
			}
			b.WriteString("}")
		}
		if r.Extra != 0 {
			fmt.Fprintf(&b, ", extra: %d", r.Extra)
		}
		if r.Items != 0 {
			fmt.Fprintf(&b, ", items: %d", r.Items)
		}
		if r.Tag != "" {
			fmt.Fprintf(&b, ", tag: %q, tagged: []alt{", r.Tag)
			for _, a := range r.Tagged {
				fmt.Fprintf(&b, "{%q, %d}, ", a.Value, a.Rule)
			}
			b.WriteString("}")
			if r.Default != 0 {
				fmt.Fprintf(&b, ", dflt: %d", r.Default)
			}
		}
		if r.AnyOf != nil {
			b.WriteString(", anyOf: []uint16{")
			for _, a := range r.AnyOf {
				fmt.Fprintf(&b, "%d, ", a)
			}
			b.WriteString("}")
		}
		b.WriteString("},\n")
	}
	b.WriteString("}\n\n")
	// One row per method of any revision, one column per revision: each method is named
	// once, and a method whose params did not change reads as the same entry repeated.
	var names []string
	for _, ms := range perRev {
		for _, m := range ms {
			if !slices.Contains(names, m.name) {
				names = append(names, m.name)
			}
		}
	}
	slices.Sort(names)
	b.WriteString("// methodIndex is the row of method in methodRules, -1 when no revision has it. A\n")
	b.WriteString("// switch on the string compiles to a binary search; the generic method is compared\n")
	b.WriteString("// without being copied to a string.\n")
	b.WriteString("func methodIndex[S string | []byte](method S) int {\n\tswitch string(method) {\n")
	for i, n := range names {
		fmt.Fprintf(&b, "\tcase %q:\n\t\treturn %d\n", n, i)
	}
	b.WriteString("\t}\n\treturn -1\n}\n\n")
	b.WriteString("// methodRules[methodIndex(method)][rev] is the params rule of method in revision rev\n")
	b.WriteString("// (an index into revisions); the zero entry is a method the revision does not have.\n")
	b.WriteString("var methodRules = [...][len(revisions)]paramsRule{\n")
	for _, n := range names {
		b.WriteString("\t{")
		for _, ms := range perRev {
			i := slices.IndexFunc(ms, func(m method) bool { return m.name == n })
			if i < 0 {
				b.WriteString("{}, ")
				continue
			}
			fmt.Fprintf(&b, "{%d, %v, true}, ", ms[i].params, ms[i].required)
		}
		fmt.Fprintf(&b, "}, // %s\n", n)
	}
	b.WriteString("}\n")
	return b.Bytes()
}

// kindExpr writes kinds as the package's constants: "kString | kInteger".
func kindExpr(k int) string {
	if k == 0 {
		return "0"
	}
	var names []string
	for i, n := range []string{"kString", "kInteger", "kFraction", "kBoolean", "kNull", "kObject", "kArray"} {
		if k&(1<<i) != 0 {
			names = append(names, n)
		}
	}
	return strings.Join(names, " | ")
}
