package compare

import (
	"strconv"
	"strings"
)

// maxCPUID bounds the CPU numbers accepted from a CPU list (a corrupt range must not
// make the parser build a huge slice).
const maxCPUID = 1 << 12

// parseCPUList parses a Linux CPU list such as "0-3,8,10-11" into CPU numbers; it
// returns nil when any part is malformed.
func parseCPUList(s string) []int {
	if s == "" {
		return nil
	}
	var cpus []int
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(strings.TrimSpace(lo))
		if err != nil || a < 0 || a > maxCPUID {
			return nil
		}
		b := a
		if isRange {
			b, err = strconv.Atoi(strings.TrimSpace(hi))
			if err != nil || b < a || b > maxCPUID {
				return nil
			}
		}
		for c := a; c <= b; c++ {
			cpus = append(cpus, c)
		}
	}
	return cpus
}

// formatCPUList renders CPU numbers as a taskset list ("0,1,2").
func formatCPUList(cpus []int) string {
	s := make([]string, len(cpus))
	for i, c := range cpus {
		s[i] = strconv.Itoa(c)
	}
	return strings.Join(s, ",")
}

// splitCPUs gives the load generator the first half of the CPUs and the servers the
// rest (the generator gets the smaller half when the count is odd). With fewer than two
// CPUs there is nothing to split and both are empty: nothing is pinned.
func splitCPUs(cpus []int) (load, servers []int) {
	if len(cpus) < 2 {
		return nil, nil
	}
	n := len(cpus) / 2
	return cpus[:n], cpus[n:]
}
