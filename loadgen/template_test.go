package loadgen

import (
	"bufio"
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
)

func TestTemplate(t *testing.T) {
	env := TemplateEnv{Seq: 42, Session: 7, Rand: newRand(1, 1)}
	tests := []struct {
		src  string
		want string // regexp
	}{
		{`{"text":"hi"}`, `^\{"text":"hi"\}$`},
		{`{"text":"hi {{seq}}"}`, `^\{"text":"hi 42"\}$`},
		{`{"n":{{seq}},"s":{{session}}}`, `^\{"n":42,"s":7\}$`},
		{`{{rand 5 5}}`, `^5$`},
		{`{{rand -3 -1}}`, `^-[123]$`},
		{`{{randstr 8}}`, `^[a-z0-9]{8}$`},
		{`{{uuid}}`, `^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`},
		{`{{now}}`, `^1[0-9]{12}$`},
		{`{{ seq }}`, `^42$`},
		{`no placeholders {}`, `^no placeholders \{\}$`},
	}
	for _, tt := range tests {
		tpl, err := ParseTemplate(tt.src)
		if err != nil {
			t.Errorf("%q: %v", tt.src, err)
			continue
		}
		got := string(tpl.Append(nil, &env))
		if !regexp.MustCompile(tt.want).MatchString(got) {
			t.Errorf("%q -> %q, want /%s/", tt.src, got, tt.want)
		}
		if tpl.Static() != !strings.Contains(tt.src, "{{") {
			t.Errorf("%q: Static() = %v", tt.src, tpl.Static())
		}
	}
}

func TestTemplateErrors(t *testing.T) {
	for _, src := range []string{"{{", "{{seq", "{{}}", "{{nope}}", "{{rand 1}}", "{{rand 2 1}}", "{{rand a b}}",
		"{{randstr 0}}", "{{randstr}}", "{{seq 1}}"} {
		if _, err := ParseTemplate(src); err == nil {
			t.Errorf("%q parsed", src)
		}
	}
}

func TestTemplateRandRange(t *testing.T) {
	tpl, _ := ParseTemplate("{{rand 1 3}}")
	env := TemplateEnv{Rand: newRand(9, 9)}
	seen := map[string]bool{}
	for range 200 {
		seen[string(tpl.Append(nil, &env))] = true
	}
	if len(seen) != 3 || !seen["1"] || !seen["3"] {
		t.Errorf("values %v, want 1..3", seen)
	}
}

func TestQuoteTemplate(t *testing.T) {
	tests := []struct{ in, want string }{
		{"file:///x", `"file:///x"`},
		{`a"b{{seq}}c\d`, `"a\"b{{seq}}c\\d"`},
		{"x{{rand 1 2}}", `"x{{rand 1 2}}"`},
		{"x{{unclosed", `"x{{unclosed"`},
	}
	for _, tt := range tests {
		if got := quoteTemplate(tt.in); got != tt.want {
			t.Errorf("quoteTemplate(%q) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

func readLines(t testing.TB, name string) []string {
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	return out
}

// FuzzTemplate: parsing never panics, and a template whose literal text is JSON with
// placeholders only inside strings stays JSON when filled in.
func FuzzTemplate(f *testing.F) {
	for _, l := range readLines(f, "testdata/templates.txt") {
		f.Add(l)
	}
	f.Fuzz(func(t *testing.T, src string) {
		tpl, err := ParseTemplate(src)
		if err != nil {
			return
		}
		env := TemplateEnv{Seq: 3, Session: 1, Rand: newRand(1, 2)}
		out := tpl.Append(nil, &env)
		if tpl.Static() && string(out) != src {
			t.Fatalf("static template %q rendered as %q", src, out)
		}
		if q := quoteTemplate(src); !strings.Contains(src, "{{") && !json.Valid([]byte(q)) {
			t.Fatalf("quoteTemplate(%q) = %s is not JSON", src, q)
		}
	})
}

func BenchmarkTemplate(b *testing.B) {
	tpl, err := ParseTemplate(`{"name":"echo","arguments":{"text":"hello {{seq}}","n":{{rand 1 100}}}}`)
	if err != nil {
		b.Fatal(err)
	}
	env := TemplateEnv{Rand: newRand(1, 1)}
	buf := make([]byte, 0, 128)
	b.ReportAllocs()
	for b.Loop() {
		env.Seq++
		buf = tpl.Append(buf[:0], &env)
	}
	b.SetBytes(int64(len(buf)))
}
