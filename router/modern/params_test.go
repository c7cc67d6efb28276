package modern

import (
	"slices"
	"testing"

	"github.com/mcprouter/mcprouter/codec"
)

func TestParamHeaders(t *testing.T) {
	tool := `{"name":"t","inputSchema":{"type":"object","properties":{
		"region":{"type":"string","x-mcp-header":"Region"},
		"level":{"type":"integer"},
		"db":{"type":"object","properties":{"shard":{"type":"integer","x-mcp-header":"Shard"}}},
		"list":{"type":"array","items":{"type":"string","x-mcp-header":"Item"}}}}}`
	got := ParamHeaders([]byte(tool))
	slices.SortFunc(got, func(a, b ParamHeader) int {
		if a.Name < b.Name {
			return -1
		}
		return 1
	})
	if len(got) != 2 || got[0].Name != "Region" || !slices.Equal(got[0].Path, []string{"region"}) ||
		got[1].Name != "Shard" || !slices.Equal(got[1].Path, []string{"db", "shard"}) {
		t.Fatalf("declarations %+v, want Region at region and Shard at db.shard (nothing under items)", got)
	}
	if ParamHeaders([]byte(`{"name":"t","inputSchema":{"type":"object"}}`)) != nil || ParamHeaders([]byte(`not json`)) != nil {
		t.Error("declarations from a tool without any")
	}
}

// TestParamHeadersSpellings: a declaration is found however encoding/json reads its key
// (any case, escapes), so that ParamHeaders' quick refusal of a tool without one
// (mayDeclareHeader) never drops one.
func TestParamHeadersSpellings(t *testing.T) {
	for _, key := range []string{`x-mcp-header`, `X-MCP-Header`, `X-Mcp-HEADER`, `x-mcp-heade\u0072`, `\u0078-mcp-header`} {
		tool := `{"name":"t","inputSchema":{"properties":{"region":{"type":"string","` + key + `":"Region"}}}}`
		if got := ParamHeaders([]byte(tool)); len(got) != 1 || got[0].Name != "Region" {
			t.Errorf("key %s: declarations %+v, want Region", key, got)
		}
	}
	for _, tool := range []string{`{"name":"t","inputSchema":{"properties":{"x":{"x-mcp-headers":"R"}}}}`, `{"name":"x-mcp-heade"}`, `{}`} {
		if got := ParamHeaders([]byte(tool)); got != nil {
			t.Errorf("%s: declarations %+v, want none", tool, got)
		}
	}
}

func TestCheckParamHeaders(t *testing.T) {
	decls := []ParamHeader{{Name: "Region", Path: []string{"region"}}, {Name: "Shard", Path: []string{"db", "shard"}}}
	for _, tc := range []struct {
		name, args, headers string
		want                int
	}{
		{"plain", `{"region":"us-west1"}`, "Mcp-Param-Region: us-west1\n", 0},
		{"name in another case", `{"region":"us-west1"}`, "mcp-param-region: us-west1\n", 0},
		{"base64", `{"region":"Hello"}`, "Mcp-Param-Region: =?base64?SGVsbG8=?=\n", 0},
		{"base64 without padding", `{"region":"Hello"}`, "Mcp-Param-Region: =?base64?SGVsbG8?=\n", codec.CodeHeaderMismatch},
		{"base64 with a bad character", `{"region":"Hello"}`, "Mcp-Param-Region: =?base64?SGVs!!!bG8=?=\n", codec.CodeHeaderMismatch},
		{"no suffix: literal", `{"region":"=?base64?SGVsbG8="}`, "Mcp-Param-Region: =?base64?SGVsbG8=\n", 0},
		{"no prefix: literal", `{"region":"SGVsbG8="}`, "Mcp-Param-Region: SGVsbG8=\n", 0},
		{"other value", `{"region":"eu"}`, "Mcp-Param-Region: us\n", codec.CodeHeaderMismatch},
		{"missing header", `{"region":"eu"}`, "", codec.CodeHeaderMismatch},
		{"no argument, no header", `{}`, "", 0},
		{"null argument, no header", `{"region":null}`, "", 0},
		{"header without its argument", `{}`, "Mcp-Param-Region: eu\n", codec.CodeHeaderMismatch},
		{"nested integer, numerically", `{"db":{"shard":42}}`, "Mcp-Param-Shard: 42.0\n", 0},
		{"nested integer, other", `{"db":{"shard":42}}`, "Mcp-Param-Shard: 43\n", codec.CodeHeaderMismatch},
		{"unknown headers pass", `{"region":"eu"}`, "Mcp-Param-Other: x\nMcp-Param-Region: eu\n", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h []byte
			if tc.headers != "" {
				h = []byte(tc.headers)
			}
			rej := CheckParamHeaders(decls, []byte(tc.args), h)
			if rej.Code != tc.want || (tc.want != 0 && rej.Status != 400) {
				t.Fatalf("code %d status %d (%s), want %d", rej.Code, rej.Status, rej.Message, tc.want)
			}
		})
	}
}

// TestCheckParamHeadersAllocs: a tools/call whose headers agree with its arguments is
// judged without allocating (the per-request path of a tool that declares headers).
func TestCheckParamHeadersAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under -race")
	}
	decls := []ParamHeader{{Name: "Region", Path: []string{"region"}}, {Name: "Shard", Path: []string{"db", "shard"}}}
	args := []byte(`{"region":"Hello","db":{"shard":42}}`)
	h := []byte("Mcp-Param-Other: x\nmcp-param-region: =?base64?SGVsbG8=?=\nMcp-Param-Shard: 42\n")
	if n := testing.AllocsPerRun(100, func() {
		if r := CheckParamHeaders(decls, args, h); r.Code != 0 {
			t.Fatal(r.Message)
		}
	}); n != 0 {
		t.Errorf("matching headers: %v allocs", n)
	}
}
