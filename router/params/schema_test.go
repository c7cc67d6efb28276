package params

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The per-revision table: for every request and notification in each revision's schema
// (read again here, with encoding/json, independently of the generator), a valid params
// value built from the schema must pass; removing each required member must fail with
// "<path>: required"; giving each described member a value of a kind (or a string) the
// schema does not allow must fail with "<path>: must be ...". Members of required
// nested objects are covered the same way, three levels down.

type schema = map[string]any

type schemaDoc struct {
	rev  string
	defs map[string]any
}

func loadSchema(t testing.TB, rev string) *schemaDoc {
	raw, err := os.ReadFile(filepath.Join("testdata", rev, "schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	defs, _ := doc["$defs"].(map[string]any)
	if defs == nil {
		defs, _ = doc["definitions"].(map[string]any)
	}
	return &schemaDoc{rev: rev, defs: defs}
}

// resolve follows $ref.
func (d *schemaDoc) resolve(s any) schema {
	for range 10 {
		m, _ := s.(schema)
		ref, ok := m["$ref"].(string)
		if !ok {
			return m
		}
		s = d.defs[ref[strings.LastIndex(ref, "/")+1:]]
	}
	return nil
}

type schemaMethod struct {
	name     string
	params   schema // resolved; nil when the message has no params member
	required bool
}

func (d *schemaDoc) methods() []schemaMethod {
	byName := map[string]schemaMethod{}
	for dn, def := range d.defs {
		props, _ := def.(schema)["properties"].(schema)
		mp, _ := props["method"].(schema)
		name, ok := mp["const"].(string)
		if !ok || strings.HasPrefix(dn, "Client") || strings.HasPrefix(dn, "Server") {
			continue
		}
		m := schemaMethod{name: name, params: d.resolve(props["params"])}
		for _, r := range def.(schema)["required"].([]any) {
			m.required = m.required || r == "params"
		}
		byName[name] = m
	}
	return slices.SortedFunc(maps.Values(byName), func(a, b schemaMethod) int { return strings.Compare(a.name, b.name) })
}

// alternative returns the first alternative of an anyOf/oneOf (the one instance
// builds), or s itself.
func (d *schemaDoc) alternative(s schema) schema {
	for _, k := range []string{"anyOf", "oneOf"} {
		if alts, ok := s[k].([]any); ok {
			return d.resolve(alts[0])
		}
	}
	return s
}

// instance builds a valid value of s with only the required members.
func (d *schemaDoc) instance(s schema, depth int) any {
	s = d.alternative(d.resolve(s))
	if depth > 8 || s == nil {
		return map[string]any{}
	}
	if all, ok := s["allOf"].([]any); ok {
		out := map[string]any{}
		for _, a := range all {
			for k, v := range d.instance(d.resolve(a), depth+1).(map[string]any) {
				out[k] = v
			}
		}
		return out
	}
	if v, ok := s["const"]; ok {
		return v
	}
	if vs, ok := s["enum"].([]any); ok {
		return vs[0]
	}
	t := s["type"]
	if l, ok := t.([]any); ok {
		t = l[0]
	}
	switch t {
	case "string":
		return "s"
	case "integer", "number":
		return 1
	case "boolean":
		return true
	case "null":
		return nil
	case "array":
		return []any{}
	}
	out := map[string]any{}
	props, _ := s["properties"].(schema)
	for _, r := range asSlice(s["required"]) {
		out[r.(string)] = d.instance(d.resolve(props[r.(string)]), depth+1)
	}
	return out
}

func asSlice(v any) []any { l, _ := v.([]any); return l }

// kinds returns the JSON kinds s allows, by name; nil when it allows anything.
func (d *schemaDoc) kinds(s schema) map[string]bool {
	s = d.resolve(s)
	out := map[string]bool{}
	for _, k := range []string{"anyOf", "oneOf"} {
		if alts, ok := s[k].([]any); ok {
			for _, a := range alts {
				ak := d.kinds(d.resolve(a))
				if ak == nil {
					return nil
				}
				for n := range ak {
					out[n] = true
				}
			}
			return out
		}
	}
	if _, ok := s["allOf"]; ok {
		return map[string]bool{"object": true}
	}
	switch t := s["type"].(type) {
	case string:
		out[t] = true
	case []any:
		for _, n := range t {
			out[n.(string)] = true
		}
	}
	if _, ok := s["const"].(string); ok {
		out["string"] = true
	}
	if len(out) == 0 && s["properties"] != nil {
		out["object"] = true
	}
	if len(out) == 0 {
		return nil
	}
	if out["number"] {
		out["integer"] = true
	}
	return out
}

// wrongValues returns values of s's member that s does not allow: one of a kind it
// does not allow, and a string outside its enum or const.
func (d *schemaDoc) wrongValues(s schema) []any {
	k := d.kinds(s)
	if k == nil {
		return nil
	}
	var out []any
	for _, c := range []struct {
		kind string
		v    any
	}{{"string", "s"}, {"integer", 7}, {"object", map[string]any{}}, {"array", []any{}}, {"boolean", true}, {"null", nil}} {
		if !k[c.kind] {
			out = append(out, c.v)
			break
		}
	}
	if k["integer"] && !k["number"] {
		out = append(out, 1.5) // a number where an integer is wanted
	}
	r := d.alternative(d.resolve(s))
	if _, ok := r["const"].(string); ok {
		out = append(out, "not-the-constant")
	} else if _, ok := r["enum"].([]any); ok && k["string"] {
		out = append(out, "not-in-the-enum")
	}
	return out
}

type schemaCase struct {
	params any    // the params value
	path   string // "" for a valid value
	reason string // "required", or the prefix "must be"
}

// cases derives the cases of one object schema s whose valid value is valid, at path.
func (d *schemaDoc) cases(s schema, valid map[string]any, path string, depth int, out []schemaCase, wrap func(any) any) []schemaCase {
	whole := d.resolve(s)
	s = d.alternative(whole)
	union := whole["anyOf"] != nil || whole["oneOf"] != nil
	props, _ := s["properties"].(schema)
	if all, ok := s["allOf"].([]any); ok {
		props = schema{}
		for _, a := range all {
			for k, v := range d.resolve(a)["properties"].(schema) {
				props[k] = v
			}
		}
	}
	required := map[string]bool{}
	for _, r := range asSlice(s["required"]) {
		required[r.(string)] = true
	}
	for _, a := range asSlice(s["allOf"]) {
		for _, r := range asSlice(d.resolve(a)["required"]) {
			required[r.(string)] = true
		}
	}
	names := make([]string, 0, len(props))
	for n := range props {
		names = append(names, n)
	}
	slices.Sort(names)
	with := func(n string, v any, drop bool) any {
		c := map[string]any{}
		for k, x := range valid {
			c[k] = x
		}
		if drop {
			delete(c, n)
		} else {
			c[n] = v
		}
		return wrap(c)
	}
	for _, n := range names {
		p := path + segment(n)
		if required[n] {
			if _, tag := d.resolve(props[n])["const"]; tag && union {
				// Without its tag, which alternative it breaks is the validator's
				// guess (the default one): any member may be named.
				out = append(out, schemaCase{with(n, nil, true), "*", ""})
			} else {
				out = append(out, schemaCase{with(n, nil, true), p, "required"})
			}
		}
		for _, v := range d.wrongValues(d.resolve(props[n])) {
			out = append(out, schemaCase{with(n, v, false), p, "must be"})
		}
		sub, isObj := valid[n].(map[string]any)
		if required[n] && isObj && depth < 3 {
			n := n
			out = d.cases(d.resolve(props[n]), sub, p, depth+1, out, func(v any) any { return with(n, v, false) })
		}
	}
	return out
}

func TestValidateSchemaTable(t *testing.T) {
	for _, rev := range Revisions() {
		t.Run(rev, func(t *testing.T) {
			d := loadSchema(t, rev)
			total := 0
			for _, m := range d.methods() {
				if !Known(rev, m.name) {
					t.Errorf("%s: not in the tables", m.name)
					continue
				}
				if m.params == nil {
					continue
				}
				valid, _ := d.instance(m.params, 0).(map[string]any)
				cases := []schemaCase{{params: valid}}
				cases = d.cases(m.params, valid, "params", 1, cases, func(v any) any { return v })
				// _meta, reserved in every message's params.
				cases = append(cases, schemaCase{withMember(valid, "_meta", "x"), "params._meta", "must be"})
				if !m.required {
					cases = append(cases, schemaCase{nil, "", ""})
				} else {
					cases = append(cases, schemaCase{nil, "params", "required"})
				}
				for _, c := range cases {
					var raw []byte
					if c.params != nil {
						raw, _ = json.Marshal(c.params)
					}
					err := Validate(rev, m.name, raw)
					switch {
					case c.path == "" && err != nil:
						t.Errorf("%s %s: %v, want valid", m.name, raw, err)
					case c.path != "" && err == nil:
						t.Errorf("%s %s: valid, want %s: %s", m.name, raw, c.path, c.reason)
					case c.path != "" && c.path != "*":
						e := err.(*Error)
						if e.Path != c.path || !strings.HasPrefix(e.Reason, c.reason) {
							t.Errorf("%s %s: %v, want %s: %s...", m.name, raw, err, c.path, c.reason)
						}
					}
				}
				total += len(cases)
			}
			t.Logf("%s: %d methods, %d cases", rev, len(d.methods()), total)
		})
	}
}

func withMember(obj map[string]any, name string, v any) map[string]any {
	c := map[string]any{name: v}
	for k, x := range obj {
		if k != name {
			c[k] = x
		}
	}
	return c
}

// The specification's own example requests and notifications of 2026-07-28 pass.
func TestValidateSpecExamples(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("testdata", "2026-07-28", "examples", "*.json"))
	if len(files) == 0 {
		t.Fatal("no examples")
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var msg struct {
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		if err := json.Unmarshal(raw, &msg); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if !Known("2026-07-28", msg.Method) {
			t.Errorf("%s: method %s not in the tables", f, msg.Method)
		}
		if err := Validate("2026-07-28", msg.Method, msg.Params); err != nil {
			t.Errorf("%s: %v", filepath.Base(f), err)
		}
	}
}
