package fanout

import (
	"strings"
	"testing"
	"time"
)

func TestFormat(t *testing.T) {
	for _, tt := range []struct {
		d    time.Duration
		want string
	}{
		{0, "-"}, {1500 * time.Nanosecond, "2 µs"}, {999 * time.Microsecond, "999 µs"},
		{1234 * time.Microsecond, "1.23 ms"}, {250 * time.Millisecond, "250 ms"},
	} {
		if got := fmtDur(tt.d); got != tt.want {
			t.Errorf("fmtDur(%v) = %q, want %q", tt.d, got, tt.want)
		}
	}
	for _, tt := range []struct {
		v    float64
		want string
	}{{0, "0"}, {999.6, "1,000"}, {1234567, "1,234,567"}, {100, "100"}} {
		if got := fmtRate(tt.v); got != tt.want {
			t.Errorf("fmtRate(%v) = %q, want %q", tt.v, got, tt.want)
		}
	}
}

// TestMarkdownTargets: the targets line follows the figures.
func TestMarkdownTargets(t *testing.T) {
	rep := &Report{Updates: 2, Warmup: 1, GOMAXPROCS: 2, Sizes: []SizeResult{
		{Sessions: 100, Router: Result{PerSec: 60, P99: time.Millisecond}, NATS: Result{PerSec: 100}},
		{Sessions: TargetP99Sessions, Router: Result{PerSec: 50, P99: 150 * time.Millisecond}, NATS: Result{PerSec: 100}},
	}}
	md := rep.Markdown(Environment{Command: "go run ./bench/cmd/fanout", Machine: "test", Servers: "a test"})
	if !strings.HasPrefix(md, "## fan-out\n") {
		t.Fatalf("section heading: %q", md[:20])
	}
	if !strings.Contains(md, "at every size: **met**") || !strings.Contains(md, "under 100ms: **missed**") {
		t.Errorf("targets line wrong:\n%s", md)
	}
	ratioOK, p99OK, measured := rep.TargetsMet()
	if !ratioOK || p99OK || !measured {
		t.Errorf("TargetsMet = %v %v %v", ratioOK, p99OK, measured)
	}
}
