package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func readTestdata(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestFilter: passing tests and their logs vanish, failures and every skip show with
// their output, and only the skips whose reason names the race detector are recorded
// (a subtest's as its top-level test; a name containing "Race" is not a reason).
func TestFilter(t *testing.T) {
	skips := filepath.Join(t.TempDir(), "skips")
	var out strings.Builder
	err := filterMain([]string{"-skips", skips}, strings.NewReader(readTestdata(t, "race.jsonl")), &out)
	if !errors.Is(err, errFailed) {
		t.Errorf("error %v, want errFailed (TestBroken failed)", err)
	}
	if want := readTestdata(t, "race.out"); out.String() != want {
		t.Errorf("output:\n%s\nwant:\n%s", out.String(), want)
	}
	got, err := os.ReadFile(skips)
	if err != nil {
		t.Fatal(err)
	}
	if want := "m/codec\tTestAllocsScan\nm/workers\tTestGuards\n"; string(got) != want {
		t.Errorf("race skips:\n%s\nwant:\n%s", got, want)
	}
}

// TestFilterForbidRaceSkips: in the run without the race detector, a guard that still
// skips for it fails the step, and -v shows each guard that ran.
func TestFilterForbidRaceSkips(t *testing.T) {
	pass := `{"Action":"output","Package":"m/codec","Test":"TestAllocsScan","Output":"--- PASS: TestAllocsScan (0.01s)\n"}
{"Action":"pass","Package":"m/codec","Test":"TestAllocsScan"}
`
	skip := `{"Action":"output","Package":"m/codec","Test":"TestAllocsSplitBatch","Output":"    a_test.go:3: allocation counts are meaningless under -race\n"}
{"Action":"output","Package":"m/codec","Test":"TestAllocsSplitBatch","Output":"--- SKIP: TestAllocsSplitBatch (0.00s)\n"}
{"Action":"skip","Package":"m/codec","Test":"TestAllocsSplitBatch"}
`
	var out strings.Builder
	err := filterMain([]string{"-v", "-forbid-race-skips"}, strings.NewReader(pass+skip), &out)
	if err == nil || !strings.Contains(err.Error(), "1 tests skipped") {
		t.Errorf("error %v, want one naming the skipped guard", err)
	}
	for _, want := range []string{"--- PASS: TestAllocsScan", "--- SKIP: TestAllocsSplitBatch", "m/codec TestAllocsSplitBatch skipped without the race detector"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if err := filterMain([]string{"-forbid-race-skips"}, strings.NewReader(pass), &out); err != nil {
		t.Errorf("clean run: %v", err)
	}
}

// TestFilterFailedPackage: what tells why a package failed outside any failing test is
// printed, and the package fails: the output of a test that never ended (the binary
// panicked or timed out), and a race report written during a test that passes (the
// race was in a goroutine it left running).
func TestFilterFailedPackage(t *testing.T) {
	for _, tc := range []struct {
		name, in, shows string
	}{
		{"leftovers", `{"Action":"output","Package":"m/x","Test":"TestHang","Output":"panic: test timed out after 20m0s\n"}
{"Action":"output","Package":"m/x","Output":"FAIL\tm/x\t1200.001s\n"}
{"Action":"fail","Package":"m/x"}
`, "panic: test timed out"},
		{"race in a passing test", `{"Action":"output","Package":"m/x","Test":"TestA","Output":"WARNING: DATA RACE\n"}
{"Action":"output","Package":"m/x","Test":"TestA","Output":"--- PASS: TestA (0.01s)\n"}
{"Action":"pass","Package":"m/x","Test":"TestA"}
{"Action":"output","Package":"m/x","Output":"FAIL\tm/x\t1.001s\n"}
{"Action":"fail","Package":"m/x"}
`, "WARNING: DATA RACE"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out strings.Builder
			if err := filterMain(nil, strings.NewReader(tc.in), &out); !errors.Is(err, errFailed) {
				t.Errorf("error %v, want errFailed", err)
			}
			if !strings.Contains(out.String(), tc.shows) {
				t.Errorf("output lacks %q:\n%s", tc.shows, out.String())
			}
		})
	}
}

func TestRaceTests(t *testing.T) {
	dir := t.TempDir()
	write := func(name, src string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("race_test.go", "//go:build race\n\npackage p\n\nconst raceEnabled = true\n")
	write("a_test.go", `package p

import "testing"

func skipUnderRace(t *testing.T) {
	if raceEnabled {
		t.Skip("race")
	}
}

func guard(t *testing.T) { skipUnderRace(t) }

func TestDirect(t *testing.T) {
	if !raceEnabled {
		t.Error("checked only without the race detector")
	}
}

func TestThroughHelpers(t *testing.T) { guard(t) }

func TestPlain(t *testing.T) {}

func TestMain(m *testing.M) { _ = raceEnabled }
`)
	got, err := raceTests(dir)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, " ") != "TestDirect TestThroughHelpers" {
		t.Errorf("got %q, want TestDirect and TestThroughHelpers", got)
	}
}
