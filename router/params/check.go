package params

import (
	"strconv"
	"strings"

	"github.com/mcprouter/mcprouter/codec"
)

// kind is a set of JSON kinds, as bits.
type kind uint8

const (
	kString kind = 1 << iota
	kInteger
	kFraction // a number with a fraction or an exponent
	kBoolean
	kNull
	kObject
	kArray

	kNumber = kInteger | kFraction
)

// rule is what a value must be, compiled from a schema by internal/gen. The zero rule
// accepts anything; rules refer to each other by index in rules.
type rule struct {
	kinds   kind     // allowed kinds; 0: any
	enum    []string // allowed strings (const, enum); nil: any
	members []member // an object's described members, in name order
	extra   uint16   // the rule of an object's other members (additionalProperties)
	items   uint16   // the rule of an array's elements
	tag     string   // objects: the member whose constant value picks one of tagged
	tagged  []alt
	dflt    uint8    // the alternative (index in tagged, plus one) when tag is absent; 0: tag required
	anyOf   []uint16 // alternatives of disjoint kinds, picked by the value's kind
}

type member struct {
	name     string
	required bool
	rule     uint16
}

type alt struct {
	value string
	rule  uint16
}

const (
	reasonRequired = "required"
	reasonInvalid  = "invalid JSON"
)

// at puts seg in front of the path of e, on the way back up from where it was found.
func (e *Error) at(seg string) *Error {
	e.Path = seg + e.Path
	return e
}

// kindOf returns the kind of the JSON value v (as the codec's Walker returns it: no
// surrounding whitespace), or 0 when v does not start like one.
func kindOf(v []byte) kind {
	if len(v) == 0 {
		return 0
	}
	switch c := v[0]; c {
	case '"':
		if len(v) < 2 || v[len(v)-1] != '"' {
			return 0
		}
		return kString
	case '{':
		return kObject
	case '[':
		return kArray
	case 't', 'f':
		return kBoolean
	case 'n':
		return kNull
	default:
		if c != '-' && c-'0' >= 10 {
			return 0
		}
		for _, d := range v {
			if d == '.' || d == 'e' || d == 'E' {
				return kFraction
			}
		}
		return kInteger
	}
}

// check checks the value v against r; the error's path is relative to v.
func check(r *rule, v []byte) *Error {
	k := kindOf(v)
	if k == 0 {
		return &Error{Reason: reasonInvalid}
	}
	if r.kinds != 0 && r.kinds&k == 0 {
		return &Error{Reason: mustBe(r.kinds)}
	}
	if r.anyOf != nil {
		if a := pick(r, k); a != r {
			return check(a, v)
		}
		return nil
	}
	switch k {
	case kString:
		if r.enum != nil && !inEnum(r.enum, v[1:len(v)-1]) {
			return &Error{Reason: oneOf(r.enum)}
		}
	case kObject:
		if r.tag != "" {
			return checkTagged(r, v)
		}
		if r.members != nil || r.extra != 0 {
			return checkObject(r, v)
		}
	case kArray:
		if r.items != 0 {
			return checkArray(&rules[r.items], v)
		}
	}
	return nil
}

// checkObject checks the members of the object v against r.
func checkObject(r *rule, v []byte) *Error {
	var w codec.Walker
	w.Object(v)
	return walkObject(r, &w, nil)
}

// walkObject checks the members of the object w walks: each described member against
// its rule, the others against r.extra, then that the required ones were there. With
// sk (params itself, ValidateJudged) its _meta is passed over when sk says it conformed
// already, and judged when it is checked.
func walkObject(r *rule, w *codec.Walker, sk *skip) *Error {
	var seen uint64
	for key, esc, ok := w.Key(); ok; key, esc, ok = w.Key() {
		sub := r.extra
		i := memberIndex(r.members, key, esc)
		if i >= 0 {
			seen |= 1 << i
			sub = r.members[i].rule
		}
		judge := false
		if sk != nil && i >= 0 && r.members[i].name == "_meta" && w.On(sk.meta) {
			if sk.j.rule.Load() == uint32(sub)+1 && w.Pass(sk.meta) {
				continue
			}
			judge = true
		}
		if e := checkAt(&rules[sub], w); e != nil {
			if i >= 0 {
				return e.at(segment(r.members[i].name))
			}
			name, _ := codec.Unquote(nil, key)
			return e.at(segment(string(name)))
		}
		if judge {
			sk.j.rule.Store(uint32(sub) + 1)
		}
	}
	if w.Err() != nil {
		return &Error{Reason: reasonInvalid}
	}
	for i := range r.members {
		if m := &r.members[i]; m.required && seen&(1<<i) == 0 {
			return &Error{Path: segment(m.name), Reason: reasonRequired}
		}
	}
	return nil
}

// checkAt checks the value w is on against r and moves w past it. An object or array
// whose members or elements have rules is walked in place (Enter), not scanned first:
// each byte of params is scanned once however deep it sits.
func checkAt(r *rule, w *codec.Walker) *Error {
	switch c := w.Peek(); {
	case c == '{' && r.kinds&kObject != 0:
		if r.anyOf != nil {
			r = pick(r, kObject)
		}
		if r.tag != "" || (r.members == nil && r.extra == 0) {
			break
		}
		var in codec.Walker
		w.Enter(&in)
		if e := walkObject(r, &in, nil); e != nil {
			return e
		}
		if _, ok := w.Exit(&in); !ok {
			return &Error{Reason: reasonInvalid}
		}
		return nil
	case c == '[' && r.kinds&kArray != 0:
		if r.anyOf != nil {
			r = pick(r, kArray)
		}
		if r.items == 0 {
			break
		}
		var in codec.Walker
		w.Enter(&in)
		if e := walkArray(&rules[r.items], &in); e != nil {
			return e
		}
		if _, ok := w.Exit(&in); !ok {
			return &Error{Reason: reasonInvalid}
		}
		return nil
	}
	v, ok := w.Value()
	if !ok {
		return &Error{Reason: reasonInvalid}
	}
	if r.kinds == 0 {
		return nil
	}
	return check(r, v)
}

// pick returns the alternative of r for a value of kind k (r.anyOf covers it: r.kinds
// is the union of the alternatives' kinds).
func pick(r *rule, k kind) *rule {
	for _, a := range r.anyOf {
		if rules[a].kinds&k != 0 {
			return &rules[a]
		}
	}
	return r
}

// checkTagged picks the alternative of r that the value of the member r.tag names and
// checks v against it.
func checkTagged(r *rule, v []byte) *Error {
	var w codec.Walker
	w.Object(v)
	var tv []byte
	for key, esc, val, ok := w.Next(); ok; key, esc, val, ok = w.Next() {
		if keyIs(key, esc, r.tag) {
			tv = val
			break
		}
	}
	if tv == nil {
		if w.Err() != nil {
			return &Error{Reason: reasonInvalid}
		}
		if r.dflt != 0 {
			return check(&rules[r.tagged[r.dflt-1].rule], v)
		}
		return &Error{Path: segment(r.tag), Reason: reasonRequired}
	}
	if kindOf(tv) == kString {
		for i := range r.tagged {
			if a := &r.tagged[i]; rawIs(tv[1:len(tv)-1], a.value) {
				return check(&rules[a.rule], v)
			}
		}
	}
	values := make([]string, len(r.tagged))
	for i, a := range r.tagged {
		values[i] = a.value
	}
	return &Error{Path: segment(r.tag), Reason: oneOf(values)}
}

// checkArray checks every element of the array v against r.
func checkArray(r *rule, v []byte) *Error {
	var w codec.Walker
	w.Array(v)
	return walkArray(r, &w)
}

// walkArray checks every element of the array w walks against r.
func walkArray(r *rule, w *codec.Walker) *Error {
	for n := 0; w.Peek() != 0; n++ {
		if e := checkAt(r, w); e != nil {
			return e.at("[" + strconv.Itoa(n) + "]")
		}
	}
	if w.Err() != nil {
		return &Error{Reason: reasonInvalid}
	}
	return nil
}

// memberIndex returns the index of the member named by the raw key (esc: it has
// escapes), or -1.
func memberIndex(ms []member, key []byte, esc bool) int {
	if esc {
		var buf [128]byte
		dec, err := codec.Unquote(buf[:0], key)
		if err != nil {
			return -1
		}
		key = dec
	}
	for i := range ms {
		if ms[i].name == string(key) {
			return i
		}
	}
	return -1
}

// keyIs reports whether the raw key (esc: it has escapes) is name.
func keyIs(key []byte, esc bool, name string) bool {
	if !esc {
		return string(key) == name
	}
	return rawIs(key, name)
}

// rawIs reports whether the raw string contents raw decode to s.
func rawIs(raw []byte, s string) bool {
	if strings.IndexByte(string(raw), '\\') < 0 {
		return string(raw) == s
	}
	var buf [128]byte
	dec, err := codec.Unquote(buf[:0], raw)
	return err == nil && string(dec) == s
}

func inEnum(enum []string, raw []byte) bool {
	for _, s := range enum {
		if rawIs(raw, s) {
			return true
		}
	}
	return false
}

// segment is the path segment of a member: ".name", or `["name"]` when the name is not
// a plain identifier (the reserved _meta keys have dots and slashes).
func segment(name string) string {
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return "[" + strconv.Quote(name) + "]"
		}
	}
	return "." + name
}

var kindWords = [...]struct {
	k    kind
	word string
}{
	{kString, "a string"}, {kNumber, "a number"}, {kInteger, "an integer"}, {kBoolean, "a boolean"},
	{kObject, "an object"}, {kArray, "an array"}, {kNull, "null"},
}

// mustBe says which kinds a value must have: "must be a string or an integer".
func mustBe(k kind) string {
	var words []string
	for _, w := range kindWords {
		if k&w.k == w.k {
			words = append(words, w.word)
			k &^= w.k
		}
	}
	return "must be " + strings.Join(words, " or ")
}

// oneOf says which strings a value must be: `must be one of "a", "b"`.
func oneOf(values []string) string {
	if len(values) == 1 {
		return "must be " + strconv.Quote(values[0])
	}
	var b strings.Builder
	b.WriteString("must be one of ")
	for i, v := range values {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Quote(v))
	}
	return b.String()
}
