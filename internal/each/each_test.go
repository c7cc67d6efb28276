package each

import (
	"errors"
	"strconv"
	"testing"
)

func TestMap(t *testing.T) {
	got, err := Map([]string{"1", "22", "333"}, strconv.Atoi)
	if err != nil || len(got) != 3 || got[0] != 1 || got[1] != 22 || got[2] != 333 {
		t.Fatalf("Map = %v, %v; want [1 22 333], nil", got, err)
	}
	empty, err := Map(nil, strconv.Atoi)
	if err != nil || empty == nil || len(empty) != 0 {
		t.Fatalf("Map(nil) = %#v, %v; want an empty, non-nil slice", empty, err)
	}
}

// TestMapStopsAtFirstError: the elements after a failure are not visited, and no
// values come back with the error.
func TestMapStopsAtFirstError(t *testing.T) {
	bad := errors.New("bad")
	var seen []int
	got, err := Map([]int{1, 2, 3}, func(n int) (int, error) {
		seen = append(seen, n)
		if n == 2 {
			return 0, bad
		}
		return n, nil
	})
	if !errors.Is(err, bad) || got != nil {
		t.Fatalf("Map = %v, %v; want nil, bad", got, err)
	}
	if len(seen) != 2 {
		t.Fatalf("visited %v, want [1 2]", seen)
	}
}
