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
// constants of errors.go list the same codes, both ways.
func TestErrorCodesInREADME(t *testing.T) {
	consts := codeConstants(t)
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	table := readmeCodes(t, string(readme))
	for code, name := range consts {
		if !table[code] {
			t.Errorf("%s (%d) is missing from the README's error table", name, code)
		}
	}
	for code := range table {
		if _, ok := consts[code]; !ok {
			t.Errorf("the README's error table lists %d, which codec/errors.go does not define", code)
		}
	}
}

// codeConstants reads the Code* constants of errors.go: code -> name.
func codeConstants(t *testing.T) map[int]string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "errors.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	codes := map[int]string{}
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok || len(vs.Names) != 1 || len(vs.Values) != 1 || !strings.HasPrefix(vs.Names[0].Name, "Code") {
			return true
		}
		u, ok := vs.Values[0].(*ast.UnaryExpr)
		lit, isLit := u.X.(*ast.BasicLit)
		if !ok || u.Op != token.SUB || !isLit {
			t.Fatalf("%s is not a negative literal", vs.Names[0].Name)
		}
		v, err := strconv.Atoi(lit.Value)
		if err != nil {
			t.Fatal(err)
		}
		codes[-v] = vs.Names[0].Name
		return true
	})
	if len(codes) == 0 {
		t.Fatal("no Code constants found in errors.go")
	}
	return codes
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
