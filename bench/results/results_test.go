package results

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReplaceSection(t *testing.T) {
	const sec = "## compare\n\nnew body\n"
	for _, tc := range []struct {
		name, doc, want string
	}{
		{"empty document", "", sec},
		{"appended after other sections", "# Results\n\n## sse\n\nx\n", "# Results\n\n## sse\n\nx\n\n" + sec},
		{"appended without trailing newline", "# Results\n\n## sse\nx", "# Results\n\n## sse\nx\n\n" + sec},
		{"replaced in the middle", "# R\n\n## a\n\nA\n\n## compare\n\nold\nold\n\n## b\n\nB\n",
			"# R\n\n## a\n\nA\n\n" + sec + "\n## b\n\nB\n"},
		{"replaced at the end", "# R\n\n## a\n\nA\n\n## compare\n\nold\n", "# R\n\n## a\n\nA\n\n" + sec},
		{"a heading inside a code block is not the end", "## compare\n\n```\n## not a heading\n```\nold\n\n## b\nB\n",
			sec + "\n## b\nB\n"},
		{"a longer heading is another section", "## compare notes\n\nkeep\n", "## compare notes\n\nkeep\n\n" + sec},
		{"### subsections belong to the section", "## compare\n\n### sub\n\nold\n## b\n", sec + "\n## b\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := string(ReplaceSection([]byte(tc.doc), "## compare", sec))
			if got != tc.want {
				t.Errorf("got:\n%q\nwant:\n%q", got, tc.want)
			}
			// Idempotent: replacing again changes nothing.
			if again := string(ReplaceSection([]byte(got), "## compare", sec)); again != got {
				t.Errorf("second replacement changed the document:\n%q", again)
			}
		})
	}
}

// FuzzReplaceSection: whatever the document, the result contains the section, the text
// before an existing section is kept, and a second replacement is a no-op.
func FuzzReplaceSection(f *testing.F) {
	f.Add([]byte("# R\n\n## a\n\nA\n\n## compare\n\nold\n\n## b\n\nB\n"), "body")
	f.Add([]byte("## compare\n```\n## x\n"), "")
	if data, err := os.ReadFile(filepath.Join("..", "compare", "testdata", "section.golden")); err == nil {
		f.Add(data, "body")
	}
	f.Fuzz(func(t *testing.T, doc []byte, body string) {
		if strings.Contains(body, "```") || strings.Contains(body, "\r") {
			return // a section's body holds no fences of its own
		}
		for _, line := range strings.Split(body, "\n") {
			if strings.HasPrefix(line, "## ") {
				return // nor headings of its own: they would start another section
			}
		}
		sec := "## compare\n\n" + body + "\n"
		got := ReplaceSection(doc, "## compare", sec)
		if !bytes.Contains(got, []byte(strings.TrimRight(sec, "\n"))) {
			t.Fatalf("section missing from %q", got)
		}
		if again := ReplaceSection(got, "## compare", sec); !bytes.Equal(again, got) {
			t.Fatalf("not idempotent:\n%q\n%q", got, again)
		}
		if i := bytes.Index(doc, []byte("## compare\n")); i == 0 || (i > 0 && doc[i-1] == '\n' && !bytes.Contains(doc[:i], []byte("```"))) {
			if !bytes.HasPrefix(got, doc[:i]) {
				t.Fatalf("the text before the section changed:\n%q\n%q", doc[:i], got)
			}
		}
	})
}

func TestReplaceSectionKeepsNeighbours(t *testing.T) {
	const sec = "## fan-out\n\nnew\n"
	tests := []struct {
		name, doc, want string
	}{
		{"empty", "", sec},
		{"append", "# R\n\n## sse\n\nx\n", "# R\n\n## sse\n\nx\n\n" + sec},
		{"append no newline", "# R\n\n## sse\n\nx", "# R\n\n## sse\n\nx\n\n" + sec},
		{"replace last", "# R\n\n## fan-out\n\nold\nold\n", "# R\n\n" + sec},
		{"replace middle", "# R\n\n## fan-out\n\nold\n\n## workers\n\ny\n", "# R\n\n" + sec + "\n## workers\n\ny\n"},
		{"notes kept", "## fan-out\nold\n## fan-out notes\nmine\n", sec + "\n## fan-out notes\nmine\n"},
		{"prefix is not the heading", "## fan-out notes\nmine\n", "## fan-out notes\nmine\n\n" + sec},
		{"crlf", "# R\r\n## fan-out\r\nold\r\n## b\r\n", "# R\r\n" + sec + "\n## b\r\n"},
		{"subsections replaced", "## fan-out\n### detail\nold\n", sec},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(ReplaceSection([]byte(tt.doc), "## fan-out", sec)); got != tt.want {
				t.Errorf("got:\n%q\nwant:\n%q", got, tt.want)
			}
		})
	}
}
