package main

import (
	"bufio"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"path/filepath"
	"sort"
	"strings"
)

// raceIdent is the name the packages give the constant their race/!race build-tagged
// files define.
const raceIdent = "raceEnabled"

func raceTestsMain(in io.Reader, out io.Writer) error {
	var all []testID
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		pkg, dir, ok := strings.Cut(strings.TrimSpace(sc.Text()), " ")
		if !ok {
			continue
		}
		names, err := raceTests(dir)
		if err != nil {
			return fmt.Errorf("%s: %w", pkg, err)
		}
		for _, n := range names {
			all = append(all, testID{pkg, n})
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return writeTests(out, all)
}

// raceTests returns, sorted, the tests of the package in dir whose body reads
// raceEnabled directly or through functions of the package's test files that do.
func raceTests(dir string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	// calls maps each top-level function to the functions it calls by plain name;
	// marked holds the functions that depend on the race detector.
	calls := map[string][]string{}
	marked := map[string]bool{}
	for _, path := range files {
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || fn.Body == nil {
				continue
			}
			name := fn.Name.Name
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.Ident:
					if n.Name == raceIdent {
						marked[name] = true
					}
				case *ast.CallExpr:
					if id, ok := n.Fun.(*ast.Ident); ok {
						calls[name] = append(calls[name], id.Name)
					}
				}
				return true
			})
		}
	}
	// Propagate through helpers until nothing changes.
	for changed := true; changed; {
		changed = false
		for fn, callees := range calls {
			for _, c := range callees {
				if marked[c] && !marked[fn] {
					marked[fn], changed = true, true
				}
			}
		}
	}
	var tests []string
	for fn := range marked {
		if strings.HasPrefix(fn, "Test") && fn != "TestMain" {
			tests = append(tests, fn)
		}
	}
	sort.Strings(tests)
	return tests, nil
}
