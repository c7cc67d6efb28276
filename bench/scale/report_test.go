package scale

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The warnings counted are the run's, suppressed repeats included; the teardown's
// (after until) and other levels are not.
func TestLogWarnings(t *testing.T) {
	dir := t.TempDir()
	log := `time=2026-11-26T18:29:11.225Z level=WARN msg="cannot save session record" session=a err="context deadline exceeded"
time=2026-11-26T18:29:12.000Z level=INFO msg="mcprouter listening" addr=127.0.0.1:1
time=2026-11-26T18:29:31.426Z level=WARN msg="cannot save session record" session=b err="nats: 429" suppressed=82
time=2026-11-26T18:29:32.000Z level=ERROR msg="upstream gone" backend=ref
time=2026-11-26T18:36:35.773Z level=WARN msg=fasthttp msg="error when serving connection"
`
	if err := os.WriteFile(filepath.Join(dir, "router0.log"), []byte(log), 0o600); err != nil {
		t.Fatal(err)
	}
	until, _ := time.Parse(time.RFC3339, "2026-11-26T18:30:00Z")
	got := logWarnings(dir, 2, until) // router1.log is missing: skipped
	want := map[string]int{"cannot save session record": 84, "upstream gone": 1}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%q: %d, want %d", k, got[k], v)
		}
	}
}

// The table sums the processes and divides the CPU by what was delivered and opened.
func TestWriteTable(t *testing.T) {
	rep := &Report{Sessions: 4, Held: 4, Protocol: "2025-11-25", OpenTime: time.Second, Received: 4, P99: time.Second,
		Routers: []ProcStats{
			{Name: "router0", Sessions: 2, RSSBefore: 10 << 20, RSSAfter: 10<<20 + 8192, CPU: 40 * time.Microsecond, OpenCPU: 400 * time.Microsecond},
			{Name: "router1", Sessions: 2, RSSBefore: 10 << 20, RSSAfter: 10<<20 + 8192, CPU: 40 * time.Microsecond, OpenCPU: 400 * time.Microsecond},
		},
		Loaders:  []ProcStats{{Name: "loader0", Sessions: 4, RSSAfter: 1 << 20, CPU: 40 * time.Microsecond, Received: 4, OpenTime: time.Second, OpenCPU: 400 * time.Microsecond}},
		Warnings: map[string]int{"cannot save session record": 3},
	}
	if rep.RouterCPUPerDelivery() != 20*time.Microsecond || rep.LoaderCPUPerDelivery() != 10*time.Microsecond {
		t.Errorf("CPU per delivery: routers %v, loaders %v", rep.RouterCPUPerDelivery(), rep.LoaderCPUPerDelivery())
	}
	var b bytes.Buffer
	if err := rep.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| routers |", "4.0 KiB", // 8 KiB above the empty router over 2 sessions, each router
		"4 sessions/s", "routers 5000 sessions/s (200.0 µs each)", "p99 1s",
		"(0.50x the routers')", `3× "cannot save session record"`,
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("no %q in\n%s", want, b.String())
		}
	}
}

// sysc.per gives the counts per opened session, and "-" when none opened.
func TestSyscallsPerSession(t *testing.T) {
	s := sysc{Reads: 300, Writes: 150}
	if got, want := s.per(100), "3.00 reads, 1.50 writes"; got != want {
		t.Errorf("per(100) = %q, want %q", got, want)
	}
	if got := s.per(0); got != "-" {
		t.Errorf("per(0) = %q, want -", got)
	}
	if got, want := sum([]ProcStats{{OpenSyscalls: s}, {OpenSyscalls: sysc{1, 2}}}, "").OpenSyscalls, (sysc{301, 152}); got != want {
		t.Errorf("sum's system calls %+v, want %+v", got, want)
	}
}
