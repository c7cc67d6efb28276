package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
)

// event is one line of `go test -json` (see `go doc test2json`); build events carry
// ImportPath instead of Package.
type event struct {
	Action     string
	Package    string
	ImportPath string
	Test       string
	Output     string
}

// raceReason matches the reason of a skip caused by the race detector ("-race", "the
// race detector", "under race"), not words that contain it ("trace").
var raceReason = regexp.MustCompile(`(?i)\brace\b`)

// noise are the -v lines plain `go test` does not print.
var noise = []string{"=== RUN", "=== PAUSE", "=== CONT", "=== NAME"}

// filter condenses one `go test -json` stream.
type filter struct {
	out     io.Writer
	verbose bool
	// buf holds each running test's output until it ends: printed when it fails or
	// skips, dropped when it passes.
	buf       map[testID]*strings.Builder
	order     []testID // first output order, for leftovers
	raceSkips []testID
	seenSkip  map[testID]bool
	failed    bool
	// last is the package whose output was printed last: packages run in parallel and
	// their events interleave, so a test's output is headed by its package when that
	// changes.
	last string
}

func newFilter(out io.Writer, verbose bool) *filter {
	return &filter{out: out, verbose: verbose, buf: map[testID]*strings.Builder{}, seenSkip: map[testID]bool{}}
}

// line handles one line of the stream; a line that is not a JSON event (the go
// command's own messages) is printed as it is.
func (f *filter) line(raw []byte) {
	var e event
	if len(raw) == 0 || raw[0] != '{' || json.Unmarshal(raw, &e) != nil {
		fmt.Fprintf(f.out, "%s\n", raw)
		return
	}
	if e.Package == "" {
		e.Package = e.ImportPath
	}
	if e.Test == "" {
		f.packageEvent(e)
		return
	}
	f.testEvent(e)
}

func (f *filter) packageEvent(e event) {
	switch e.Action {
	case "output", "build-output":
		if strings.TrimSpace(e.Output) != "PASS" {
			io.WriteString(f.out, e.Output)
			f.last = e.Package
		}
	case "fail", "build-fail":
		f.failed = true
	}
}

func (f *filter) testEvent(e event) {
	id := testID{e.Package, e.Test}
	switch e.Action {
	case "output":
		for _, n := range noise {
			if strings.HasPrefix(strings.TrimLeft(e.Output, " "), n) {
				return
			}
		}
		b := f.buf[id]
		if b == nil {
			b = &strings.Builder{}
			f.buf[id] = b
			f.order = append(f.order, id)
		}
		b.WriteString(e.Output)
	case "fail":
		f.failed = true
		f.print(e.Package, f.take(id))
	case "skip":
		text := f.take(id)
		f.print(e.Package, text)
		if raceReason.MatchString(skipReason(text)) {
			top := testID{e.Package, strings.SplitN(e.Test, "/", 2)[0]}
			if !f.seenSkip[top] {
				f.seenSkip[top] = true
				f.raceSkips = append(f.raceSkips, top)
			}
		}
	case "pass":
		text := f.take(id)
		if strings.Contains(text, "WARNING: DATA RACE") {
			// A race in a goroutine the test left running is reported during the
			// test, which still passes; the binary then exits failing its package.
			f.print(e.Package, text)
			return
		}
		if f.verbose && !strings.Contains(e.Test, "/") {
			for _, l := range strings.SplitAfter(text, "\n") {
				if strings.HasPrefix(l, "--- PASS") {
					f.print(e.Package, l)
				}
			}
		}
	}
}

// skipReason is a skipped test's output without its "--- SKIP: Name" line, whose name
// may mention races without the reason doing so.
func skipReason(text string) string {
	var b strings.Builder
	for _, l := range strings.SplitAfter(text, "\n") {
		if !strings.HasPrefix(strings.TrimLeft(l, " "), "--- SKIP") {
			b.WriteString(l)
		}
	}
	return b.String()
}

func (f *filter) take(id testID) string {
	b := f.buf[id]
	delete(f.buf, id)
	if b == nil {
		return ""
	}
	return b.String()
}

// print writes a test's output, headed by its package when another package's output
// came before.
func (f *filter) print(pkg, text string) {
	if text == "" {
		return
	}
	if pkg != f.last {
		fmt.Fprintf(f.out, "# %s\n", pkg)
		f.last = pkg
	}
	io.WriteString(f.out, text)
}

// finish prints the output of tests that never ended (a panic or a timeout killed the
// binary): it is where the reason is.
func (f *filter) finish() {
	for _, id := range f.order {
		if f.buf[id] != nil {
			f.print(id.pkg, f.take(id))
		}
	}
}

// errFailed reports failed tests or packages.
var errFailed = errors.New("some tests failed")

func filterMain(args []string, in io.Reader, out io.Writer) error {
	fs := flag.NewFlagSet("filter", flag.ContinueOnError)
	verbose := fs.Bool("v", false, "also print one line per passed top-level test")
	skips := fs.String("skips", "", "write the tests skipped because of the race detector to this file")
	forbid := fs.Bool("forbid-race-skips", false, "fail when a test skips because of the race detector")
	if err := fs.Parse(args); err != nil {
		return err
	}
	f := newFilter(out, *verbose)
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		f.line(sc.Bytes())
	}
	f.finish()
	if err := sc.Err(); err != nil {
		return err
	}
	if *skips != "" {
		file, err := os.Create(*skips)
		if err != nil {
			return err
		}
		if err := writeTests(file, f.raceSkips); err != nil {
			file.Close()
			return err
		}
		if err := file.Close(); err != nil {
			return err
		}
	}
	if *forbid && len(f.raceSkips) > 0 {
		for _, t := range f.raceSkips {
			fmt.Fprintf(out, "%s %s skipped without the race detector: a guard that must run did not\n", t.pkg, t.name)
		}
		return fmt.Errorf("%d tests skipped for the race detector in a run without it", len(f.raceSkips))
	}
	if f.failed {
		return errFailed
	}
	return nil
}
