package transport

import "testing"

// acceptCases are Accept headers with what they allow.
var acceptCases = []struct {
	h    string
	want acceptMask
}{
	{"application/json, text/event-stream", acceptJSON | acceptSSE},
	{"text/event-stream, application/json", acceptJSON | acceptSSE},
	{"application/json,text/event-stream", acceptJSON | acceptSSE},
	{"application/json", acceptJSON},
	{"text/event-stream", acceptSSE},
	{"Application/JSON, Text/Event-Stream", acceptJSON | acceptSSE},
	{"application/json, text/event-stream;q=0", acceptJSON},
	{"application/json;q=0.5, text/event-stream;q=0.0", acceptJSON},
	{"*/*", acceptJSON | acceptSSE},
	{"application/*", acceptJSON},
	{"text/*", acceptSSE},
	{"", acceptJSON | acceptSSE},
	{"  ", acceptJSON | acceptSSE},
	{"text/html", 0},
}

// TestParseAccept: the header as MCP clients write it, and every other, read as the
// list it is (parseAcceptList), which the shortcut for the common one agrees with.
func TestParseAccept(t *testing.T) {
	for _, c := range acceptCases {
		if got := parseAccept([]byte(c.h)); got != c.want {
			t.Errorf("parseAccept(%q) = %b, want %b", c.h, got, c.want)
		}
		if got := parseAcceptList([]byte(c.h)); got != c.want {
			t.Errorf("parseAcceptList(%q) = %b, want %b", c.h, got, c.want)
		}
	}
}

// BenchmarkParseAccept: the Accept header of every POST an MCP client sends, known at
// one comparison (after) against its reading as a list (before, parseAcceptList).
func BenchmarkParseAccept(b *testing.B) {
	h := []byte(acceptBoth)
	for _, c := range []struct {
		name  string
		parse func([]byte) acceptMask
	}{{"before", parseAcceptList}, {"after", parseAccept}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if c.parse(h) != acceptJSON|acceptSSE {
					b.Fatal("wrong mask")
				}
			}
		})
	}
}
