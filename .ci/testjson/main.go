// Command testjson is the test command's reader of `go test -json` output, and its finder
// of the tests that behave differently under the race detector.
//
//	go test -json ... | testjson filter [-v] [-skips FILE] [-forbid-race-skips]
//	go list -f '{{.ImportPath}} {{.Dir}}' ./... | testjson racetests
//
// filter prints what plain `go test` prints (failures with their output, the package
// lines) plus one line per skipped test with its reason, so that a skipped guard is
// visible. -skips writes "package<TAB>Test" for every test that skipped because of the
// race detector (its reason mentions "race"); -forbid-race-skips fails when any test did;
// -v also prints one line per passed top-level test. It exits 1 when a test or package
// failed.
//
// racetests prints "package<TAB>Test" for every test whose body reads raceEnabled, directly
// or through a helper of its package: the tests whose checks change under the race
// detector even when they do not skip.
package main

import (
	"fmt"
	"io"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "filter":
		err = filterMain(os.Args[2:], os.Stdin, os.Stdout)
	case "racetests":
		err = raceTestsMain(os.Stdin, os.Stdout)
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "testjson:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: testjson filter [-v] [-skips FILE] [-forbid-race-skips] < go-test-json\n       testjson racetests < 'importpath dir' lines")
	os.Exit(2)
}

// writeTests writes "package<TAB>Test" lines.
func writeTests(w io.Writer, tests []testID) error {
	for _, t := range tests {
		if _, err := fmt.Fprintf(w, "%s\t%s\n", t.pkg, t.name); err != nil {
			return err
		}
	}
	return nil
}

// testID names a top-level test of a package.
type testID struct{ pkg, name string }
