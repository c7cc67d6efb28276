package loadgen

import (
	"bufio"
	"encoding/json"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
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

// FuzzTemplate checks templates against a reference written simply here: a template
// parses exactly when every "{{...}}" (up to the first "}}") is a known placeholder with
// valid arguments and no "{{" is left open; filling it in yields the literal text with
// each placeholder replaced by a value of its form (and range); a template that is JSON
// with its placeholders inside strings stays JSON when filled in.
func FuzzTemplate(f *testing.F) {
	for _, l := range readLines(f, "testdata/templates.txt") {
		f.Add(l)
	}
	f.Add("{{rand 0 9223372036854775807}}")
	f.Add("{{rand -9223372036854775808 9223372036854775807}}")
	f.Fuzz(func(t *testing.T, src string) {
		want, checks, ok := refTemplate(src)
		tpl, err := ParseTemplate(src)
		if (err == nil) != ok {
			t.Fatalf("ParseTemplate(%q) error %v; the reference accepts it: %v", src, err, ok)
		}
		if err != nil {
			return
		}
		env := TemplateEnv{Seq: 3, Session: 1, Rand: newRand(1, 2)}
		out := string(tpl.Append(nil, &env))
		if utf8.ValidString(src) { // regular expressions match text, not arbitrary bytes
			m := want.FindStringSubmatch(out)
			if m == nil {
				t.Fatalf("%q filled in as %q, not of the form /%s/", src, out, want)
			}
			for i, check := range checks {
				if !check(m[i+1]) {
					t.Fatalf("%q: placeholder %d gave %q", src, i, m[i+1])
				}
			}
		} else if tpl.Static() && out != src {
			t.Fatalf("static template %q rendered as %q", src, out)
		}
		if tpl.Static() != !refPlaceholder.MatchString(src) {
			t.Fatalf("%q: Static() = %v", src, tpl.Static())
		}
		if json.Valid([]byte(refPlaceholder.ReplaceAllString(src, "x"))) && !json.Valid([]byte(out)) {
			t.Fatalf("JSON template %q with placeholders in strings filled in as %q, not JSON", src, out)
		}
		if !strings.Contains(src, "{{") && utf8.ValidString(src) {
			var back string
			if q := quoteTemplate(src); json.Unmarshal([]byte(q), &back) != nil || back != src {
				t.Fatalf("quoteTemplate(%q) = %s reads back as %q", src, q, back)
			}
		}
	})
}

// refPlaceholder is a placeholder as the template syntax defines it: from "{{" to the
// first "}}" after it.
var refPlaceholder = regexp.MustCompile(`(?s)\{\{(.*?)\}\}`)

// refTemplate is the reference reading of a template: a regular expression of what it
// fills in to, with one group per {{rand}} and {{randstr}} and a check of each group's
// value, and whether the template is valid at all.
func refTemplate(src string) (*regexp.Regexp, []func(string) bool, bool) {
	var re strings.Builder
	var checks []func(string) bool
	re.WriteString("^")
	last := 0
	for _, loc := range refPlaceholder.FindAllStringSubmatchIndex(src, -1) {
		re.WriteString(regexp.QuoteMeta(src[last:loc[0]]))
		last = loc[1]
		f := strings.Fields(src[loc[2]:loc[3]])
		ints := func(n int) []int64 {
			if len(f) != n+1 {
				return nil
			}
			var v []int64
			for _, s := range f[1:] {
				x, err := strconv.ParseInt(s, 10, 64)
				if err != nil {
					return nil
				}
				v = append(v, x)
			}
			return v
		}
		// A group's value is checked only where it cannot run into its neighbours' text
		// ("{{rand 0 99}}{{rand 0 99}}" fills in as "1234"): elsewhere its form is.
		alone := !strings.ContainsAny(src[max(loc[0]-1, 0):loc[0]], "0123456789abcdefghijklmnopqrstuvwxyz-}") &&
			!strings.ContainsAny(src[loc[1]:min(loc[1]+1, len(src))], "0123456789abcdefghijklmnopqrstuvwxyz-{")
		switch {
		case len(f) == 1 && f[0] == "seq":
			re.WriteString("3")
		case len(f) == 1 && f[0] == "session":
			re.WriteString("1")
		case len(f) == 1 && f[0] == "now":
			re.WriteString("[0-9]+")
		case len(f) == 1 && f[0] == "uuid":
			re.WriteString("[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")
		case len(f) > 0 && f[0] == "rand":
			v := ints(2)
			if v == nil || v[0] > v[1] {
				return nil, nil, false
			}
			re.WriteString("(-?[0-9]+)")
			checks = append(checks, func(s string) bool {
				x, err := strconv.ParseInt(s, 10, 64)
				return err == nil && x >= v[0] && x <= v[1] || !alone
			})
		case len(f) > 0 && f[0] == "randstr":
			v := ints(1)
			if v == nil || v[0] < 1 || v[0] > 1<<20 {
				return nil, nil, false
			}
			re.WriteString("([a-z0-9]+)")
			checks = append(checks, func(s string) bool { return int64(len(s)) == v[0] || !alone })
		default:
			return nil, nil, false
		}
	}
	if strings.Contains(src[last:], "{{") {
		return nil, nil, false
	}
	re.WriteString(regexp.QuoteMeta(src[last:]) + "$")
	want, err := regexp.Compile(re.String())
	return want, checks, err == nil || !utf8.ValidString(src)
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
