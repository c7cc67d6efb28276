package fleet

import (
	"slices"
	"testing"

	"github.com/mcprouter/mcprouter/router"
)

// sessionKeys holds each key once per session, keeps the others when one goes, and
// drops the session's entry with its last key.
func TestSessionKeys(t *testing.T) {
	m := sessionKeys{}
	s1, s2 := new(router.Session), new(router.Session)
	a, b, c := subKey{uri: "file:///a"}, subKey{uri: "file:///b"}, subKey{uri: "file:///c"}
	m.add(s1, a)
	m.add(s1, a)
	m.add(s1, b)
	m.add(s1, c)
	m.add(s2, a)
	if got := m[s1]; !slices.Equal(got, keySet{a, b, c}) {
		t.Fatalf("s1 holds %v", got)
	}
	m.remove(s1, b)
	m.remove(s1, b) // not held: nothing happens
	m.remove(s2, c)
	if got := m[s1]; !slices.Equal(got, keySet{a, c}) || !got.has(c) || got.has(b) {
		t.Fatalf("s1 holds %v after b left", got)
	}
	m.remove(s1, a)
	m.remove(s1, c)
	if _, ok := m[s1]; ok || len(m) != 1 {
		t.Fatalf("index %v: s1 left behind, or s2 lost", m)
	}
	if got := listOf(m, s2); !slices.Equal(got, []subKey{a}) {
		t.Fatalf("listOf(s2) = %v", got)
	}
	if got := listOf(m, s1); got != nil {
		t.Fatalf("listOf(s1) = %v for a session without subscriptions", got)
	}
}
