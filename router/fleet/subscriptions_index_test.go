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
	m.add(s1, a, nil)
	m.add(s1, a, nil)
	m.add(s1, b, nil)
	m.add(s1, c, nil)
	m.add(s2, a, nil)
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

// TestSessionKeysShared: sessions whose one subscription is a key hold the set the caller
// shares for it, not a copy each; a second key gives a session a set of its own, and
// neither that nor its removals write into the shared one.
func TestSessionKeysShared(t *testing.T) {
	m := sessionKeys{}
	s1, s2, s3 := new(router.Session), new(router.Session), new(router.Session)
	a, b := subKey{uri: "file:///a"}, subKey{uri: "file:///b"}
	onlyA, onlyB := keySet{a}, keySet{b}
	m.add(s1, a, onlyA)
	m.add(s2, a, onlyA)
	m.add(s3, b, onlyB)
	if &m[s1][0] != &onlyA[0] || &m[s2][0] != &onlyA[0] || &m[s3][0] != &onlyB[0] {
		t.Fatal("sessions of one subscription hold a set each")
	}
	m.add(s1, b, onlyB)
	m.add(s3, a, onlyA)
	if got := m[s1]; !slices.Equal(got, keySet{a, b}) || &got[0] == &onlyA[0] {
		t.Fatalf("s1 holds %v (shared: %v)", got, &got[0] == &onlyA[0])
	}
	m.remove(s1, a)
	m.remove(s3, b)
	m.remove(s2, a)
	if !slices.Equal(onlyA, keySet{a}) || !slices.Equal(onlyB, keySet{b}) {
		t.Fatalf("the shared sets were written: %v %v", onlyA, onlyB)
	}
	if !slices.Equal(m[s1], keySet{b}) || !slices.Equal(m[s3], keySet{a}) || len(m) != 2 {
		t.Fatalf("index after the removals: %v", m)
	}
	m.remove(s1, b)
	m.remove(s3, a)
	if len(m) != 0 || !slices.Equal(onlyA, keySet{a}) || !slices.Equal(onlyB, keySet{b}) {
		t.Fatalf("index %v, shared %v %v", m, onlyA, onlyB)
	}
}
