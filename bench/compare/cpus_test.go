package compare

import (
	"slices"
	"testing"
)

func TestParseCPUList(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []int
	}{
		{"", nil},
		{"0", []int{0}},
		{"0-1", []int{0, 1}},
		{"0-3,8,10-11", []int{0, 1, 2, 3, 8, 10, 11}},
		{" 2 - 3 ", []int{2, 3}},
		{"3-1", nil},
		{"a", nil},
		{"0,", nil},
		{"-1", nil},
		{"0-99999999", nil},
	} {
		if got := parseCPUList(tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("parseCPUList(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestSplitCPUs(t *testing.T) {
	for _, tc := range []struct {
		in                 []int
		wantLoad, wantSrvs string
	}{
		{nil, "", ""},
		{[]int{0}, "", ""},
		{[]int{0, 1}, "0", "1"},
		{[]int{0, 1, 2}, "0", "1,2"},
		{[]int{4, 5, 6, 7}, "4,5", "6,7"},
	} {
		l, s := splitCPUs(tc.in)
		if formatCPUList(l) != tc.wantLoad || formatCPUList(s) != tc.wantSrvs {
			t.Errorf("splitCPUs(%v) = %v, %v; want %s / %s", tc.in, l, s, tc.wantLoad, tc.wantSrvs)
		}
	}
}
