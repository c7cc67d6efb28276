package loadgen

import (
	"encoding/json"
	"testing"
)

func TestMinimalArgs(t *testing.T) {
	tests := []struct{ name, schema, want string }{
		{"empty", ``, `{}`},
		{"not json", `{`, `{}`},
		{"no required", `{"type":"object","properties":{"a":{"type":"string"}}}`, `{}`},
		{"string", `{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`, `{"text":"x"}`},
		{"integer minimum", `{"type":"object","properties":{"ms":{"type":"integer","minimum":5}},"required":["ms"]}`, `{"ms":5}`},
		{"exclusive minimum", `{"properties":{"n":{"type":"number","exclusiveMinimum":0}},"required":["n"]}`, `{"n":1}`},
		{"maximum below zero", `{"properties":{"n":{"type":"integer","maximum":-3}},"required":["n"]}`, `{"n":-3}`},
		{"default wins", `{"properties":{"n":{"type":"integer","default":7,"examples":[9]}},"required":["n"]}`, `{"n":7}`},
		{"example", `{"properties":{"q":{"type":"string","examples":["cats"]}},"required":["q"]}`, `{"q":"cats"}`},
		{"enum", `{"properties":{"level":{"type":"string","enum":["debug","info"]}},"required":["level"]}`, `{"level":"debug"}`},
		{"const", `{"properties":{"v":{"const":3}},"required":["v"]}`, `{"v":3}`},
		{"boolean and null type list", `{"properties":{"b":{"type":["null","boolean"]}},"required":["b"]}`, `{"b":false}`},
		{"min length", `{"properties":{"s":{"type":"string","minLength":3}},"required":["s"]}`, `{"s":"xxx"}`},
		{"format", `{"properties":{"u":{"type":"string","format":"uri"}},"required":["u"]}`, `{"u":"https://example.com/"}`},
		{"array min items", `{"properties":{"a":{"type":"array","minItems":2,"items":{"type":"integer"}}},"required":["a"]}`, `{"a":[0,0]}`},
		{"nested object", `{"properties":{"o":{"type":"object","properties":{"x":{"type":"string"},"y":{"type":"string"}},"required":["y"]}},"required":["o"]}`, `{"o":{"y":"x"}}`},
		{"anyOf", `{"properties":{"v":{"anyOf":[{"type":"integer"},{"type":"string"}]}},"required":["v"]}`, `{"v":0}`},
		{"required but undescribed", `{"required":["z"]}`, `{"z":null}`},
		{"order of required", `{"properties":{"a":{"type":"integer"},"b":{"type":"string"}},"required":["b","a"]}`, `{"b":"x","a":0}`},
	}
	for _, tt := range tests {
		got := MinimalArgs([]byte(tt.schema))
		if got != tt.want {
			t.Errorf("%s: got %s, want %s", tt.name, got, tt.want)
		}
		if !json.Valid([]byte(got)) {
			t.Errorf("%s: %s is not JSON", tt.name, got)
		}
	}
}

// A schema that refers to itself through deep nesting still ends.
func TestMinimalArgsDepthBound(t *testing.T) {
	s := `{"type":"integer"}`
	for range 40 {
		s = `{"type":"object","properties":{"n":` + s + `},"required":["n"]}`
	}
	if got := MinimalArgs([]byte(s)); !json.Valid([]byte(got)) {
		t.Fatalf("not JSON: %s", got)
	}
}
