package codec

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestErrorCodesInREADME: the README's table of the errors the router makes and the Code
// constants of errors.go's table list the same codes, both ways; the codes the router
// never makes (errors.go's second block) are not in the README's table, nor in the first.
func TestErrorCodesInREADME(t *testing.T) {
	made, never := codeConstants(t)
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	table := readmeCodes(t, string(readme))
	for code, name := range made {
		if !table[code] {
			t.Errorf("%s (%d) is missing from the README's error table", name, code)
		}
	}
	for code := range table {
		if _, ok := made[code]; !ok {
			t.Errorf("the README's error table lists %d, which codec/errors.go's table does not define", code)
		}
	}
	for code, name := range never {
		if table[code] {
			t.Errorf("the README's table of the errors the router makes lists %s (%d), which the router never makes", name, code)
		}
		if other, ok := made[code]; ok {
			t.Errorf("%d is both %s, which the router makes, and %s, which it never makes", code, other, name)
		}
	}
}

// codeConstants reads the Code* constants of errors.go, code -> name: made, those of the
// constant blocks the router answers with, and never, those of the block whose doc says
// the router never makes them.
func codeConstants(t *testing.T) (made, never map[int]string) {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "errors.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	made, never = map[int]string{}, map[int]string{}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		into := made
		if g.Doc != nil && strings.Contains(g.Doc.Text(), "never makes") {
			into = never
		}
		for _, s := range g.Specs {
			vs := s.(*ast.ValueSpec)
			if len(vs.Names) != 1 || len(vs.Values) != 1 || !strings.HasPrefix(vs.Names[0].Name, "Code") {
				continue
			}
			u, ok := vs.Values[0].(*ast.UnaryExpr)
			if !ok || u.Op != token.SUB {
				t.Fatalf("%s is not a negative literal", vs.Names[0].Name)
			}
			lit, ok := u.X.(*ast.BasicLit)
			if !ok {
				t.Fatalf("%s is not a negative literal", vs.Names[0].Name)
			}
			v, err := strconv.Atoi(lit.Value)
			if err != nil {
				t.Fatal(err)
			}
			into[-v] = vs.Names[0].Name
		}
	}
	if len(made) == 0 || len(never) == 0 {
		t.Fatal("errors.go's two blocks of Code constants (made, never made) were not both found")
	}
	return made, never
}

// readmeCodes reads the codes of the table under "### Errors the router makes".
func readmeCodes(t *testing.T, readme string) map[int]bool {
	t.Helper()
	_, section, ok := strings.Cut(readme, "### Errors the router makes")
	if !ok {
		t.Fatal(`README has no "### Errors the router makes" section`)
	}
	if end := strings.Index(section, "\n#"); end >= 0 {
		section = section[:end]
	}
	codes := map[int]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\| (-\d+) \|`).FindAllStringSubmatch(section, -1) {
		n, _ := strconv.Atoi(m[1])
		if codes[n] {
			t.Errorf("the README's error table lists %d twice", n)
		}
		codes[n] = true
	}
	return codes
}
