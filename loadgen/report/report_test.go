package report

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
	"github.com/google/go-cmp/cmp"

	"github.com/mcprouter/mcprouter/internal/golden"
)

// checkGolden compares got with testdata/name, or rewrites it with -update.
func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	golden.Check(t, filepath.Join("testdata", name), got)
}

func load(t *testing.T, name string) *Report {
	t.Helper()
	r, err := ReadJSONFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestTableGolden(t *testing.T) {
	for _, name := range []string{"open", "closed"} {
		var b bytes.Buffer
		if err := load(t, name+".json").WriteTable(&b); err != nil {
			t.Fatal(err)
		}
		checkGolden(t, name+".table.golden", b.Bytes())
	}
}

func TestCompareGolden(t *testing.T) {
	var b bytes.Buffer
	if err := Compare(&b, load(t, "closed.json"), load(t, "open.json"), "closed.json", "open.json"); err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "compare.golden", b.Bytes())
}

func TestJSONRoundTrip(t *testing.T) {
	r := load(t, "open.json")
	path := filepath.Join(t.TempDir(), "r.json")
	if err := r.WriteJSONFile(path); err != nil {
		t.Fatal(err)
	}
	back, err := ReadJSONFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(r, back); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	if err := os.WriteFile(path, []byte(`{"tool":"other"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadJSONFile(path); err == nil {
		t.Error("a foreign JSON file was accepted")
	}
}

func TestHTML(t *testing.T) {
	for _, name := range []string{"open", "closed"} {
		r := load(t, name+".json")
		var b bytes.Buffer
		if err := r.WriteHTML(&b); err != nil {
			t.Fatal(err)
		}
		html := b.String()
		for _, id := range []string{"chart-latency-distribution", "chart-throughput", "chart-latency-time"} {
			if !strings.Contains(html, `id="`+id+`"`) {
				t.Errorf("%s: no %s", name, id)
			}
		}
		if n := strings.Count(html, `<polyline class="series"`); n != 7 {
			t.Errorf("%s: %d series, want 7", name, n)
		}
		// Self-contained: nothing is fetched.
		if regexp.MustCompile(`(?i)<(script|img|link|iframe)[^>]+(src|href)=`).MatchString(html) || strings.Contains(html, "@import") {
			t.Errorf("%s: the page references external resources", name)
		}
	}
	// An empty report renders too (a run where every call failed).
	var b bytes.Buffer
	if err := (&Report{Tool: "mcpload"}).WriteHTML(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "no data") {
		t.Error("empty charts are not marked")
	}
}

func TestFormatUS(t *testing.T) {
	tests := []struct {
		us   float64
		want string
	}{
		{0, "0"}, {0.25, "250ns"}, {35.24, "35.2µs"}, {350, "350µs"}, {1234, "1.23ms"}, {123456, "123ms"}, {2.5e6, "2.50s"},
	}
	for _, tt := range tests {
		if got := FormatUS(tt.us); got != tt.want {
			t.Errorf("FormatUS(%v) = %q, want %q", tt.us, got, tt.want)
		}
	}
}

func TestNiceScale(t *testing.T) {
	tests := []struct{ max, top, step float64 }{
		{0, 1, 0.2}, {1, 1, 0.2}, {7, 8, 2}, {48000, 50000, 10000}, {0.3, 0.3, 0.1},
	}
	for _, tt := range tests {
		top, step := niceScale(tt.max)
		if !close(top, tt.top) || !close(step, tt.step) {
			t.Errorf("niceScale(%v) = %v, %v; want %v, %v", tt.max, top, step, tt.top, tt.step)
		}
	}
}

func close(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }

func TestSummarize(t *testing.T) {
	h := hdr.New(1, int64(1e12), 3)
	for i := int64(1); i <= 1000; i++ {
		_ = h.RecordValue(i * 1000) // 1µs .. 1ms
	}
	l := Summarize(h)
	if l.Count != 1000 || l.Min != 1 || l.P50 < 499 || l.P50 > 501 || l.Max < 999 || l.Max > 1001 {
		t.Errorf("summary %+v", l)
	}
	if Summarize(nil) != (Latency{}) {
		t.Error("nil histogram")
	}
	pts := Curve(h, h)
	if len(pts) != len(curvePercentiles) || pts[0].Percentile != 0 || pts[len(pts)-1].Corrected < 999 {
		t.Errorf("curve %v", pts)
	}
}

// TestCountSlow: the slow count is exact away from the threshold; a value in the
// threshold's bucket counts as at it (the documented 0.1% resolution), one a bucket
// below does not. No threshold gives no count, an empty histogram a zero one.
func TestCountSlow(t *testing.T) {
	h := hdr.New(1, int64(1e12), 3)
	for i := int64(1); i <= 1000; i++ {
		_ = h.RecordValue(i * 10_000) // 10µs .. 10ms
	}
	for _, tt := range []struct {
		threshold int64
		count     int64
		pct       float64
	}{
		{1, 1000, 100},
		{5_000_000, 501, 50.1}, // 5ms .. 10ms
		{4_997_120, 501, 50.1}, // the start of 5ms's bucket (4,997,120 .. 5,001,215)
		{5_001_215, 501, 50.1}, // its end: 5ms is within the resolution, counted
		{5_001_216, 500, 50},   // the next bucket: 5ms is under
		{9_994_239, 2, 0.2},    // the end of 9.99ms's bucket
		{9_994_240, 1, 0.1},    // the start of 10ms's (9,994,240 .. 10,002,431)
		{10_002_431, 1, 0.1},   // its end
		{10_002_432, 0, 0},     // over every value
		{int64(1e12), 0, 0},    // the histogram's top
	} {
		s := CountSlow(h, tt.threshold)
		if s == nil || s.Count != tt.count || s.Pct != tt.pct || s.ThresholdUS != round3(float64(tt.threshold)/1e3) {
			t.Errorf("threshold %dns: %+v, want count %d (%v%%)", tt.threshold, s, tt.count, tt.pct)
		}
	}
	if s := CountSlow(h, 0); s != nil {
		t.Errorf("no threshold: %+v, want none", s)
	}
	if s := CountSlow(hdr.New(1, int64(1e12), 3), 1000); s == nil || s.Count != 0 || s.Pct != 0 || s.ThresholdUS != 1 {
		t.Errorf("empty histogram: %+v", s)
	}
	if s := CountSlow(nil, 1000); s == nil || s.Count != 0 {
		t.Errorf("nil histogram: %+v", s)
	}
}
