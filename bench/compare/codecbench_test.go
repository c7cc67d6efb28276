package compare

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcprouter/mcprouter/internal/golden"
)

func TestStripProcs(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"BenchmarkX-2", "BenchmarkX"},
		{"BenchmarkEnvelope/codec/call199-16", "BenchmarkEnvelope/codec/call199"},
		{"BenchmarkX", "BenchmarkX"},
		{"BenchmarkX-", "BenchmarkX-"},
		{"BenchmarkX-y", "BenchmarkX-y"},
		{"Benchmark/a-b-4", "Benchmark/a-b"},
		{"-4", "-4"},
	} {
		if got := stripProcs(tc.in); got != tc.want {
			t.Errorf("stripProcs(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{3}, 3},
		{[]float64{3, 1}, 2},
		{[]float64{5, 1, 3}, 3},
		{[]float64{4, 1, 3, 2}, 2.5},
	} {
		in := append([]float64(nil), tc.in...)
		if got := median(in); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.in, got, tc.want)
		}
		for i := range in {
			if in[i] != tc.in[i] {
				t.Fatalf("median reordered its argument: %v", in)
			}
		}
	}
}

func TestParseBenchMedians(t *testing.T) {
	f, err := os.Open(filepath.Join("testdata", "count3.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	lines, err := ParseBench(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) != 7 { // 6 envelope lines + BenchmarkOther; the broken line is skipped
		t.Fatalf("parsed %d lines, want 7: %+v", len(lines), lines)
	}
	sums := Summarize(lines)
	if len(sums) != 3 {
		t.Fatalf("%d summaries, want 3", len(sums))
	}
	codec := sums[0]
	if codec.Name != "BenchmarkEnvelope/codec/call199" || codec.Runs != 3 {
		t.Fatalf("first summary %+v", codec)
	}
	// The outlier (500 ns/op) does not move the median.
	if got := codec.Metrics["ns/op"]; got != 130 {
		t.Errorf("codec ns/op median = %v, want 130", got)
	}
	if got := codec.Metrics["cpu-ns/op"]; got != 122 {
		t.Errorf("codec cpu-ns/op median = %v, want 122", got)
	}
	rows := EnvelopeRows(sums)
	if len(rows) != 2 {
		t.Fatalf("%d envelope rows, want 2 (BenchmarkOther is not an envelope benchmark)", len(rows))
	}
	if rows[0].Lib != "codec" || rows[0].Speedup != 1 {
		t.Errorf("codec row %+v", rows[0])
	}
	// Ranked by CPU time: gojson median 360 / codec median 122.
	if want := 360.0 / 122; rows[1].Lib != "gojson" || rows[1].Speedup != want {
		t.Errorf("gojson row: speedup %v, want %v", rows[1].Speedup, want)
	}
}

func TestEnvelopeRowsGolden(t *testing.T) {
	data := golden.Read(t, filepath.Join("testdata", "envelope.txt"))
	lines, err := ParseBench(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	r := &Result{Codec: EnvelopeRows(Summarize(lines)), CodecCommand: "go test -bench BenchmarkEnvelope ./codec"}
	var b strings.Builder
	r.codecTable(&b)
	checkGolden(t, "envelope.golden", b.String())
}

func TestEnvelopeRowsCodecFirst(t *testing.T) {
	sums := []BenchSummary{
		{Name: "BenchmarkEnvelope/sonic/m", Metrics: map[string]float64{"ns/op": 40}},
		{Name: "BenchmarkEnvelope/codec/m", Metrics: map[string]float64{"ns/op": 10}},
		{Name: "BenchmarkEnvelope/gojson/m", Metrics: map[string]float64{"ns/op": 20}},
		{Name: "BenchmarkEnvelope/nolib", Metrics: map[string]float64{"ns/op": 1}},
		{Name: "BenchmarkEnvelope/sonic/other", Metrics: map[string]float64{"ns/op": 1}},
	}
	rows := EnvelopeRows(sums)
	var got []string
	for _, r := range rows {
		got = append(got, r.Lib+"/"+r.Message)
	}
	want := "codec/m sonic/m gojson/m sonic/other"
	if strings.Join(got, " ") != want {
		t.Fatalf("order %v, want %s", got, want)
	}
	if rows[1].Speedup != 4 || rows[2].Speedup != 2 || rows[3].Speedup != 0 {
		t.Errorf("speedups %v %v %v (no codec row for 'other': 0)", rows[1].Speedup, rows[2].Speedup, rows[3].Speedup)
	}
}

// FuzzParseBench: any input parses without panicking, and every result line has a
// positive iteration count and a name without the GOMAXPROCS suffix's dash-digits.
func FuzzParseBench(f *testing.F) {
	for _, name := range []string{"envelope.txt", "count3.txt"} {
		f.Add(golden.Read(f, filepath.Join("testdata", name)))
	}
	f.Add([]byte("BenchmarkX-2 1 2 ns/op\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		lines, err := ParseBench(bytes.NewReader(data))
		if err != nil {
			return // a line longer than the scanner's limit
		}
		for _, l := range lines {
			if l.Iterations <= 0 || !strings.HasPrefix(l.Name, "Benchmark") {
				t.Fatalf("bad line %+v", l)
			}
		}
		rows := EnvelopeRows(Summarize(lines))
		for _, r := range rows {
			if r.Speedup < 0 && r.Lib == "codec" {
				t.Fatalf("negative speedup %+v", r)
			}
		}
	})
}
