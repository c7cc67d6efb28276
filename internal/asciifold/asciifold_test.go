package asciifold

import "testing"

func TestEqualContains(t *testing.T) {
	for _, tc := range []struct {
		b, lower       string
		equal, contain bool
	}{
		{"bearer", "bearer", true, true},
		{"BeArEr", "bearer", true, true},
		{"bearer ", "bearer", false, true},
		{"beare", "bearer", false, false},
		{"X-MCP-Header", "x-mcp-header", true, true},
		{`{"x-Mcp-HEADER":1}`, "x-mcp-header", false, true},
		{"x_mcp-header", "x-mcp-header", false, false}, // only letters fold
		{"", "bearer", false, false},
		{"anything", "", false, true},
	} {
		if got := Equal([]byte(tc.b), tc.lower); got != tc.equal {
			t.Errorf("Equal(%q, %q) = %v", tc.b, tc.lower, got)
		}
		if got := Contains([]byte(tc.b), tc.lower); got != tc.contain {
			t.Errorf("Contains(%q, %q) = %v", tc.b, tc.lower, got)
		}
	}
}
