package loadgen

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
)

// maxSchemaDepth bounds the recursion into nested object and array schemas: a schema
// that refers to itself, or one built to be deep, still gets an answer.
const maxSchemaDepth = 16

// MinimalArgs builds the smallest arguments object a tool's inputSchema accepts, so
// that a tool can be measured without writing --args first: only the required members,
// each with its default, else its first example, const or enum value, else a value of
// its type that respects the bounds the schema states (minimum, minLength, minItems).
// The members keep the order of the schema's required list. A schema that is not an
// object schema, or that says nothing, gives {}.
func MinimalArgs(schema []byte) string {
	var s jsonSchema
	if len(bytes.TrimSpace(schema)) == 0 || json.Unmarshal(schema, &s) != nil {
		return "{}"
	}
	var b strings.Builder
	s.writeObject(&b, 0)
	return b.String()
}

// jsonSchema is the part of a JSON Schema that MinimalArgs reads.
type jsonSchema struct {
	Type             json.RawMessage        `json:"type"`
	Properties       map[string]*jsonSchema `json:"properties"`
	Required         []string               `json:"required"`
	Items            *jsonSchema            `json:"items"`
	Default          json.RawMessage        `json:"default"`
	Examples         []json.RawMessage      `json:"examples"`
	Const            json.RawMessage        `json:"const"`
	Enum             []json.RawMessage      `json:"enum"`
	AnyOf            []*jsonSchema          `json:"anyOf"`
	OneOf            []*jsonSchema          `json:"oneOf"`
	AllOf            []*jsonSchema          `json:"allOf"`
	Minimum          *float64               `json:"minimum"`
	ExclusiveMinimum *float64               `json:"exclusiveMinimum"`
	Maximum          *float64               `json:"maximum"`
	MinLength        int                    `json:"minLength"`
	MinItems         int                    `json:"minItems"`
	Format           string                 `json:"format"`
}

// typeName is the schema's type: the first one other than "null" when it lists several,
// "object" when it has properties but no type.
func (s *jsonSchema) typeName() string {
	var one string
	if json.Unmarshal(s.Type, &one) == nil {
		return one
	}
	var many []string
	if json.Unmarshal(s.Type, &many) == nil {
		for _, t := range many {
			if t != "null" {
				return t
			}
		}
		if len(many) > 0 {
			return many[0]
		}
	}
	if s.Properties != nil || s.Required != nil {
		return "object"
	}
	return ""
}

// writeValue writes the minimal value of s.
func (s *jsonSchema) writeValue(b *strings.Builder, depth int) {
	if s == nil || depth > maxSchemaDepth {
		b.WriteString("null")
		return
	}
	if v := s.offered(); v != nil {
		b.Write(v)
		return
	}
	for _, alts := range [][]*jsonSchema{s.AnyOf, s.OneOf, s.AllOf} {
		if len(alts) > 0 && s.typeName() == "" {
			alts[0].writeValue(b, depth+1)
			return
		}
	}
	switch s.typeName() {
	case "object":
		s.writeObject(b, depth)
	case "array":
		b.WriteByte('[')
		for i := range min(s.MinItems, 100) {
			if i > 0 {
				b.WriteByte(',')
			}
			s.Items.writeValue(b, depth+1)
		}
		b.WriteByte(']')
	case "string":
		b.WriteString(strconv.Quote(s.minimalString()))
	case "integer", "number":
		b.WriteString(strconv.FormatFloat(s.minimalNumber(), 'f', -1, 64))
	case "boolean":
		b.WriteString("false")
	default:
		b.WriteString("null")
	}
}

// offered is the value the schema itself offers, in the order MinimalArgs promises: its
// default, else its first example, else its const, else its first enum value; nil when
// it offers none.
func (s *jsonSchema) offered() json.RawMessage {
	for _, vs := range [...][]json.RawMessage{{s.Default}, s.Examples, {s.Const}, s.Enum} {
		if len(vs) > 0 && len(vs[0]) > 0 {
			return vs[0]
		}
	}
	return nil
}

// writeObject writes an object of s's required members.
func (s *jsonSchema) writeObject(b *strings.Builder, depth int) {
	b.WriteByte('{')
	for i, name := range s.Required {
		if i > 0 {
			b.WriteByte(',')
		}
		key, _ := json.Marshal(name)
		b.Write(key)
		b.WriteByte(':')
		s.Properties[name].writeValue(b, depth+1)
	}
	b.WriteByte('}')
}

// minimalString is a short string of s's format, at least minLength long.
func (s *jsonSchema) minimalString() string {
	v := "x"
	switch s.Format {
	case "uri", "url", "iri":
		v = "https://example.com/"
	case "email":
		v = "user@example.com"
	case "date-time":
		v = "2025-01-01T00:00:00Z"
	case "date":
		v = "2025-01-01"
	case "uuid":
		v = "00000000-0000-4000-8000-000000000000"
	}
	if n := min(s.MinLength, 1<<10); len(v) < n {
		v += strings.Repeat("x", n-len(v))
	}
	return v
}

// minimalNumber is 0, or the bound that keeps it in range.
func (s *jsonSchema) minimalNumber() float64 {
	v := 0.0
	if s.Minimum != nil && v < *s.Minimum {
		v = *s.Minimum
	}
	if s.ExclusiveMinimum != nil && v <= *s.ExclusiveMinimum {
		v = *s.ExclusiveMinimum + 1
	}
	if s.Maximum != nil && v > *s.Maximum {
		v = *s.Maximum
	}
	if s.typeName() == "integer" {
		v = float64(int64(v))
	}
	return v
}
