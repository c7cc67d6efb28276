package params

import (
	"encoding/json"
	"testing"
)

// Validate must not allocate on the valid path: every revision's valid params of every
// method (as the schema table builds them) and the examples of the benchmarks.
func TestAllocsValidate(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under -race")
	}
	for _, rev := range Revisions() {
		d := loadSchema(t, rev)
		for _, m := range d.methods() {
			if m.params == nil {
				continue
			}
			raw, _ := json.Marshal(d.instance(m.params, 0))
			method := []byte(m.name)
			if n := testing.AllocsPerRun(20, func() { _ = Validate(rev, method, raw) }); n != 0 {
				t.Errorf("%s %s %s: %v allocs", rev, m.name, raw, n)
			}
		}
	}
	for _, b := range benchCases {
		params := []byte(b.params)
		if n := testing.AllocsPerRun(20, func() { _ = Validate(b.rev, b.method, params) }); n != 0 {
			t.Errorf("%s %s: %v allocs", b.rev, b.method, n)
		}
	}
}
