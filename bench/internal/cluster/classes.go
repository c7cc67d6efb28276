package cluster

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// ErrorClasses renders a run's errors by class, sorted, each with the first message seen
// (cut to 80 characters), as the chaos and soak verdicts print them: "timeout=3 (first:
// ...), transport=1". No errors read "none".
func ErrorClasses(by map[string]int64, first map[string]string) string {
	if len(by) == 0 {
		return "none"
	}
	parts := make([]string, 0, len(by))
	for _, k := range slices.Sorted(maps.Keys(by)) {
		p := fmt.Sprintf("%s=%d", k, by[k])
		if m := first[k]; m != "" {
			p += fmt.Sprintf(" (first: %.80s)", m)
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, ", ")
}
