package fleet

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// testFleet builds a fleet whose backends have the given tool names, without any
// connection.
func testFleet(t *testing.T, prefixes []string, tools [][]string) *Fleet {
	t.Helper()
	cfg := Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for i, p := range prefixes {
		cfg.Backends = append(cfg.Backends, BackendConfig{Name: fmt.Sprintf("b%d", i), Prefix: p})
	}
	f := New(cfg)
	for i, b := range f.set.all() {
		var lists [numKinds][]item
		for _, name := range tools[i] {
			exposed := name
			if b.cfg.Prefix != "" {
				exposed = b.cfg.Prefix + Separator + name
			}
			lists[kTools] = append(lists[kTools], item{key: exposed, raw: []byte(`{"name":"` + exposed + `"}`)})
		}
		b.lists.Store(&lists)
	}
	f.catalog.rebuild()
	return f
}

func names(n int, prefix string) []string {
	var out []string
	for i := 0; i < n; i++ {
		out = append(out, fmt.Sprintf("%s%03d", prefix, i))
	}
	return out
}

// pageAll follows nextCursor until the end and returns every name seen.
func pageAll(t *testing.T, cat *catalog, size int) []string {
	t.Helper()
	var seen []string
	var cursor []byte
	for pages := 0; pages < 1000; pages++ {
		res, err := cat.page(nil, kTools, cursor, size, nil)
		if err != nil {
			t.Fatal(err)
		}
		var r struct {
			Tools      []struct{ Name string } `json:"tools"`
			NextCursor string                  `json:"nextCursor"`
		}
		if err := json.Unmarshal(res, &r); err != nil {
			t.Fatalf("page is not JSON: %v: %s", err, res)
		}
		if len(r.Tools) > size {
			t.Fatalf("page of %d items, size %d", len(r.Tools), size)
		}
		for _, tl := range r.Tools {
			seen = append(seen, tl.Name)
		}
		if r.NextCursor == "" {
			return seen
		}
		cursor = []byte(r.NextCursor)
	}
	t.Fatal("cursor never ends")
	return nil
}

func TestMergedPaginationReachesEveryItem(t *testing.T) {
	f := testFleet(t, []string{"a", "b", "c"}, [][]string{names(230, "x"), nil, names(7, "y")})
	var want []string
	for _, n := range names(230, "x") {
		want = append(want, "a__"+n)
	}
	for _, n := range names(7, "y") {
		want = append(want, "c__"+n)
	}
	for _, size := range []int{1, 7, 50, 100, 1000} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			if diff := cmp.Diff(want, pageAll(t, f.catalog.load(), size)); diff != "" {
				t.Fatalf("items (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCollisionFirstBackendWins(t *testing.T) {
	f := testFleet(t, []string{"", ""}, [][]string{{"echo", "only_a"}, {"echo", "only_b"}})
	cat := f.catalog.load()
	if r := cat.tools["echo"]; r.b != f.set.all()[0] {
		t.Fatalf("echo routed to %s, want the first backend", r.b.cfg.Name)
	}
	if diff := cmp.Diff([]string{"echo", "only_a", "only_b"}, pageAll(t, cat, 10)); diff != "" {
		t.Fatalf("the hidden duplicate must not be listed (-want +got):\n%s", diff)
	}
}

func TestInvalidCursors(t *testing.T) {
	f := testFleet(t, []string{"a", "b"}, [][]string{names(3, "x"), names(3, "y")})
	for _, c := range []string{"%%%", "djE", appendCursorString([]int{1}), appendCursorString([]int{1, -1}), "dj.x"} {
		if _, err := f.catalog.load().page(nil, kTools, []byte(c), 2, nil); err == nil {
			t.Errorf("cursor %q accepted", c)
		}
	}
}

func appendCursorString(pos []int) string { return string(appendCursor(nil, pos)) }

func TestResourceOwnerLongestTemplatePrefix(t *testing.T) {
	f := testFleet(t, []string{"a", "b"}, [][]string{nil, nil})
	cat := &catalog{resources: map[string]*backend{"file:///x": f.set.all()[1]}}
	cat.templates = []templateRoute{{prefix: "file:///docs/", b: f.set.all()[1]}, {prefix: "file:///", b: f.set.all()[0]}}
	for uri, want := range map[string]*backend{
		"file:///x":          f.set.all()[1],
		"file:///docs/a.md":  f.set.all()[1],
		"file:///etc/passwd": f.set.all()[0],
		"http://nowhere":     nil,
	} {
		if got := cat.resourceOwner(uri); got != want {
			t.Errorf("%s: got %v want %v", uri, got, want)
		}
	}
}
