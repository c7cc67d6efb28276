package conformance

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Summary is what one server run of the conformance suite reported on its output: the
// number of scenarios it announced, one line per scenario, and the totals.
type Summary struct {
	Announced int // "Running <suite> suite (N scenarios)"
	Scenarios []Scenario
	Passed    int // "Total: P passed, F failed"
	Failed    int
}

// Scenario is one line of the suite's summary.
type Scenario struct {
	Name           string
	Passed, Failed int
}

var (
	announceLine = regexp.MustCompile(`(?m)^Running \S+ suite \((\d+) scenarios\)`)
	scenarioLine = regexp.MustCompile(`^([✓✗]) (\S.*): (\d+) passed, (\d+) failed$`)
	totalLine    = regexp.MustCompile(`^Total: (\d+) passed, (\d+) failed`)
)

const summaryHeader = "=== SUMMARY ==="

// ParseSummary reads the suite's output. Every non-blank line between the summary header
// and the total must be a scenario line, whatever the scenario's name, and the lines must
// add up to the total and to the announced count: output this parser does not fully
// understand is an error, never a pass.
func ParseSummary(out string) (Summary, error) {
	var s Summary
	m := announceLine.FindStringSubmatch(out)
	if m == nil {
		return s, errors.New("no \"Running ... suite (N scenarios)\" line")
	}
	s.Announced, _ = strconv.Atoi(m[1])
	i := strings.LastIndex(out, summaryHeader)
	if i < 0 {
		return s, errors.New("no summary section")
	}
	total := false
	for _, line := range strings.Split(out[i+len(summaryHeader):], "\n") {
		line = strings.TrimRight(line, "\r")
		if strings.TrimSpace(line) == "" {
			continue
		}
		if t := totalLine.FindStringSubmatch(line); t != nil {
			s.Passed, _ = strconv.Atoi(t[1])
			s.Failed, _ = strconv.Atoi(t[2])
			total = true
			break
		}
		sc, err := parseScenario(line)
		if err != nil {
			return s, err
		}
		s.Scenarios = append(s.Scenarios, sc)
	}
	if !total {
		return s, errors.New("no total line after the summary")
	}
	return s, s.consistent()
}

// parseScenario reads one "✓ name: P passed, F failed" line; the mark must agree with
// the failed count.
func parseScenario(line string) (Scenario, error) {
	m := scenarioLine.FindStringSubmatch(line)
	if m == nil {
		return Scenario{}, fmt.Errorf("unexpected line in the summary: %q", line)
	}
	sc := Scenario{Name: m[2]}
	sc.Passed, _ = strconv.Atoi(m[3])
	sc.Failed, _ = strconv.Atoi(m[4])
	if (m[1] == "✗") != (sc.Failed > 0) {
		return sc, fmt.Errorf("mark %s disagrees with the counts: %q", m[1], line)
	}
	return sc, nil
}

// consistent checks that the scenario lines add up to the totals and to the announced
// number of scenarios.
func (s Summary) consistent() error {
	passed, failed := 0, 0
	for _, sc := range s.Scenarios {
		passed += sc.Passed
		failed += sc.Failed
	}
	if passed != s.Passed || failed != s.Failed {
		return fmt.Errorf("scenario lines add up to %d passed, %d failed; the total says %d, %d", passed, failed, s.Passed, s.Failed)
	}
	if len(s.Scenarios) != s.Announced {
		return fmt.Errorf("%d scenarios announced, %d reported", s.Announced, len(s.Scenarios))
	}
	return nil
}

// Verdict judges one run: its output, the error its exit gave (nil for status 0), and
// the scenarios expected to fail (name: reason). It returns one problem per reason to
// fail the test; none means the run passed. A run passes only when it parsed, something
// passed, every failed scenario is an expected one, every expected failure did fail (a
// stale entry hides a regression later), and the exit status agrees with the failures.
func Verdict(out string, exitErr error, expected map[string]string) []string {
	s, err := ParseSummary(out)
	if err != nil {
		return []string{fmt.Sprintf("unreadable suite output (exit: %v): %v", exitErr, err)}
	}
	var problems []string
	if s.Passed == 0 {
		problems = append(problems, "no check passed")
	}
	for _, sc := range s.Scenarios {
		_, isExpected := expected[sc.Name]
		switch {
		case sc.Failed > 0 && !isExpected:
			problems = append(problems, fmt.Sprintf("scenario %s failed (%d passed, %d failed)", sc.Name, sc.Passed, sc.Failed))
		case sc.Failed == 0 && isExpected:
			problems = append(problems, fmt.Sprintf("scenario %s is listed as an expected failure but passed: remove it from the list", sc.Name))
		}
	}
	switch {
	case exitErr != nil && s.Failed == 0:
		problems = append(problems, fmt.Sprintf("the suite exited with %v though it reported no failed check", exitErr))
	case exitErr == nil && s.Failed > 0:
		problems = append(problems, fmt.Sprintf("the suite exited with status 0 though it reported %d failed checks", s.Failed))
	}
	return problems
}
