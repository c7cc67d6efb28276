package cluster

import (
	"strings"
	"testing"
)

// TestChecks: one failing check fails the verdict and shows as FAIL in the table.
func TestChecks(t *testing.T) {
	cs := Checks{{What: "a", Figure: "1", Pass: true}, {What: "b", Figure: "2", Pass: false}}
	if cs.Passed() {
		t.Fatal("a verdict with a failing check passed")
	}
	if !cs[:1].Passed() || !Checks(nil).Passed() {
		t.Fatal("a verdict without a failing check failed")
	}
	var b strings.Builder
	cs.WriteTable(&b)
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != 4 || !strings.Contains(lines[2], "PASS") || !strings.Contains(lines[3], "FAIL") || !strings.HasPrefix(lines[3], "| b ") {
		t.Fatalf("table:\n%s", b.String())
	}
}

// TestErrorClasses: classes sorted, each with its first message cut to 80 characters.
func TestErrorClasses(t *testing.T) {
	if got := ErrorClasses(nil, nil); got != "none" {
		t.Fatalf("no errors read %q", got)
	}
	got := ErrorClasses(map[string]int64{"timeout": 3, "overload": 1}, map[string]string{"timeout": strings.Repeat("x", 100)})
	want := "overload=1, timeout=3 (first: " + strings.Repeat("x", 80) + ")"
	if got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}
