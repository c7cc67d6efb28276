package codec

import "testing"

func TestParseUintID(t *testing.T) {
	for _, tc := range []struct {
		id   string
		want uint64
		ok   bool
	}{
		{"0", 0, true}, {"7", 7, true}, {"1844674407370955161", 1844674407370955161, true},
		{"18446744073709551615", 0, false}, {"01", 0, false}, {"-1", 0, false}, {"1.0", 0, false},
		{"1e3", 0, false}, {`"1"`, 0, false}, {"", 0, false},
	} {
		if got, ok := ParseUintID([]byte(tc.id)); ok != tc.ok || got != tc.want {
			t.Errorf("ParseUintID(%s) = %d, %v; want %d, %v", tc.id, got, ok, tc.want, tc.ok)
		}
	}
}
