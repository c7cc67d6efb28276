package conformance

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcprouter/mcprouter/internal/golden"
)

// The files under testdata are recorded output of the suite's server run: both suites
// through mcprouter fronting the Go SDK's conformance server (everything passes), and
// 0.1.16 through mcprouter with its built-in reference backends, which lack most of the
// conformance tools, resources and prompts (22 checks fail).

func recorded(t *testing.T, name string) string {
	t.Helper()
	return string(golden.Read(t, filepath.Join("testdata", name)))
}

// exitStatus1 stands for the error exec returns when the suite exits with status 1.
var exitStatus1 = errors.New("exit status 1")

func TestParseSummaryRecorded(t *testing.T) {
	for _, tc := range []struct {
		file                   string
		scenarios, pass, fails int
	}{
		{"pass-0.1.16.txt", 30, 39, 0},
		{"pass-0.2.0-alpha.12.txt", 31, 72, 0},
		{"fail-reference-backends-0.1.16.txt", 30, 9, 22},
	} {
		s, err := ParseSummary(recorded(t, tc.file))
		if err != nil {
			t.Fatalf("%s: %v", tc.file, err)
		}
		if len(s.Scenarios) != tc.scenarios || s.Passed != tc.pass || s.Failed != tc.fails {
			t.Errorf("%s: %d scenarios, %d passed, %d failed; want %d, %d, %d", tc.file, len(s.Scenarios), s.Passed, s.Failed, tc.scenarios, tc.pass, tc.fails)
		}
	}
}

// failedNames lists the scenarios the recorded failing run reports as failed.
func failedNames(t *testing.T, out string) []string {
	t.Helper()
	s, err := ParseSummary(out)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, sc := range s.Scenarios {
		if sc.Failed > 0 {
			names = append(names, sc.Name)
		}
	}
	return names
}

func allExpected(names []string) map[string]string {
	m := make(map[string]string, len(names))
	for _, n := range names {
		m[n] = "recorded failure"
	}
	return m
}

func TestVerdictRecorded(t *testing.T) {
	pass := recorded(t, "pass-0.1.16.txt")
	fail := recorded(t, "fail-reference-backends-0.1.16.txt")
	failed := failedNames(t, fail)
	if len(failed) != 22 {
		t.Fatalf("%d failed scenarios in the recording, want 22", len(failed))
	}
	allButOne := allExpected(failed[1:])

	for _, tc := range []struct {
		name     string
		out      string
		exit     error
		expected map[string]string
		want     []string // substrings, one per expected problem
	}{
		{"clean pass", pass, nil, nil, nil},
		{"alpha pass", recorded(t, "pass-0.2.0-alpha.12.txt"), nil, nil, nil},
		{"unexpected failures", fail, exitStatus1, nil, failed},
		{"every failure expected", fail, exitStatus1, allExpected(failed), nil},
		{"one failure not expected", fail, exitStatus1, allButOne, []string{"scenario " + failed[0] + " failed"}},
		{"expected failure passes", pass, nil, map[string]string{"ping": "stale"}, []string{"ping is listed as an expected failure but passed"}},
		{"non-zero exit without failures", pass, exitStatus1, nil, []string{"exited with exit status 1"}},
		{"zero exit with failures", fail, nil, allExpected(failed), []string{"exited with status 0"}},
		{"truncated", pass[:strings.Index(pass, "Total:")], exitStatus1, nil, []string{"no total line"}},
		{"killed before the summary", pass[:strings.Index(pass, summaryHeader)], errors.New("signal: killed"), nil, []string{"no summary section"}},
		{"no output", "", exitStatus1, nil, []string{"no \"Running"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Verdict(tc.out, tc.exit, tc.expected)
			if len(got) != len(tc.want) {
				t.Fatalf("%d problems, want %d:\n%s", len(got), len(tc.want), strings.Join(got, "\n"))
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("problem %d = %q, want it to mention %q", i, got[i], w)
				}
			}
		})
	}
}

// TestVerdictAnyScenarioName: a failed scenario fails the run whatever its name looks
// like (the former pattern only knew lower-case names with dashes).
func TestVerdictAnyScenarioName(t *testing.T) {
	pass := recorded(t, "pass-0.1.16.txt")
	for _, name := range []string{"auth/Token_Refresh", "sep-1686 tasks", "ÜberTool.v2"} {
		out := strings.Replace(pass, "✓ ping: 1 passed, 0 failed", "✗ "+name+": 0 passed, 1 failed", 1)
		out = strings.Replace(out, "Total: 39 passed, 0 failed", "Total: 38 passed, 1 failed", 1)
		got := Verdict(out, exitStatus1, nil)
		if len(got) != 1 || !strings.Contains(got[0], "scenario "+name+" failed") {
			t.Errorf("%q: problems %q, want one naming the scenario", name, got)
		}
	}
}

// TestParseSummaryRejects: output that does not add up is an error, never a pass.
func TestParseSummaryRejects(t *testing.T) {
	pass := recorded(t, "pass-0.1.16.txt")
	for _, tc := range []struct{ name, old, new, want string }{
		{"stray line", "✓ ping: 1 passed, 0 failed\n", "✓ ping: 1 passed, 0 failed\nTypeError: x is undefined\n", "unexpected line"},
		{"missing scenario", "✓ ping: 1 passed, 0 failed\n", "", "add up"},
		{"scenario not announced", "(30 scenarios)", "(31 scenarios)", "31 scenarios announced, 30 reported"},
		{"mark disagrees", "✓ ping: 1 passed, 0 failed", "✓ ping: 0 passed, 1 failed", "disagrees"},
		{"total disagrees", "Total: 39 passed, 0 failed", "Total: 39 passed, 2 failed", "add up"},
	} {
		out := strings.Replace(pass, tc.old, tc.new, 1)
		if out == pass {
			t.Fatalf("%s: the recording has no %q", tc.name, tc.old)
		}
		if _, err := ParseSummary(out); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want it to mention %q", tc.name, err, tc.want)
		}
	}
}
