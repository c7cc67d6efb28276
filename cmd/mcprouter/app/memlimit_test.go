package app

import (
	"os"
	"testing"
)

func TestCgroupMemoryLimit(t *testing.T) {
	for _, tc := range []struct {
		dir  string
		want int64 // 0: no limit
	}{
		{"v2", 1 << 30}, {"v2max", 0}, {"v1", 512 << 20}, {"v1unlimited", 0}, {"none", 0}, {"garbage", 0},
	} {
		got, ok := cgroupMemoryLimit(os.DirFS("testdata/cgroup/" + tc.dir))
		if got != tc.want || ok != (tc.want > 0) {
			t.Errorf("%s: %d, %v; want %d", tc.dir, got, ok, tc.want)
		}
	}
}

func TestMemoryLimit(t *testing.T) {
	v2 := os.DirFS("testdata/cgroup/v2")
	for _, tc := range []struct {
		name, configured, env string
		want                  int64
		source                string
	}{
		{"cgroup", "", "", 966367641, "cgroup"}, // 90% of 1 GiB
		{"configured", "2GiB", "", 2 << 30, "memory_limit"},
		{"environment wins", "2GiB", "1GiB", 0, "GOMEMLIMIT"},
	} {
		got, source, err := memoryLimit(tc.configured, tc.env, v2)
		if err != nil || got != tc.want || source != tc.source {
			t.Errorf("%s: %d from %q (err %v); want %d from %q", tc.name, got, source, err, tc.want, tc.source)
		}
	}
	if got, source, _ := memoryLimit("", "", os.DirFS("testdata/cgroup/v2max")); got != 0 || source != "" {
		t.Errorf("no limit anywhere: %d from %q, want none", got, source)
	}
	if _, _, err := memoryLimit("lots", "", v2); err == nil {
		t.Error("memory_limit: lots was accepted")
	}
}

func TestParseBytes(t *testing.T) {
	for in, want := range map[string]int64{"": 0, "1024": 1024, "1536MiB": 1536 << 20, "2 GiB": 2 << 30, "10MB": 10e6, "7B": 7, "1KiB": 1024} {
		if got, err := parseBytes(in); err != nil || got != want {
			t.Errorf("parseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"-1", "1.5GiB", "GiB", "12 parsecs", "99999999999TiB"} {
		if _, err := parseBytes(bad); err == nil {
			t.Errorf("parseBytes(%q) accepted", bad)
		}
	}
}
