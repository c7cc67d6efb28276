package admin

import (
	"strings"
	"testing"
)

// TestHistoryRing: the ring keeps the newest updates in order as it wraps, hands back
// the buffer that fell out, and appends only what a reader has not seen.
func TestHistoryRing(t *testing.T) {
	h := newHistory(3)
	events := func(after uint64) (string, uint64) {
		b, last, _ := h.appendSince(nil, after)
		return string(b), last
	}
	if got, last := events(0); got != "" || last != 0 {
		t.Fatalf("empty history: %q, last %d", got, last)
	}
	for i, u := range []string{"a", "b", "c", "d", "e"} {
		spare := h.add([]byte(u))
		if i < 3 && spare != nil || i >= 3 && (spare == nil || len(spare) != 0) {
			t.Fatalf("add %s: spare %q (nil %v)", u, spare, spare == nil)
		}
	}
	ev := func(ids ...string) string {
		var b strings.Builder
		for _, id := range ids {
			b.WriteString("id: " + id + "\ndata: " + string(rune('a'-1+int(id[0]-'0'))) + "\n\n")
		}
		return b.String()
	}
	for _, tc := range []struct {
		after uint64
		want  string
	}{
		{0, ev("3", "4", "5")},
		{1, ev("3", "4", "5")}, // 2 fell out: the reader gets what is kept
		{3, ev("4", "5")},
		{5, ""},
		{6, ev("3", "4", "5")}, // never handed out: nothing seen
	} {
		if got, last := events(tc.after); got != tc.want || last != 5 {
			t.Errorf("after %d: %q last %d, want %q last 5", tc.after, got, last, tc.want)
		}
	}
	_, _, added := h.appendSince(nil, 5)
	h.add([]byte("f"))
	select {
	case <-added:
	default:
		t.Error("add did not wake the reader")
	}
}
