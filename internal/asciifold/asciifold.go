// Package asciifold compares bytes with a lower-case ASCII word in any letter case,
// without allocating and without Unicode's folds: what protocol tokens need (an HTTP
// auth scheme, a JSON key that encoding/json matches case-insensitively). Any
// goroutine may call it.
package asciifold

// Equal reports whether b is lower (lower-case ASCII) in some letter case.
func Equal(b []byte, lower string) bool {
	if len(b) != len(lower) {
		return false
	}
	for i := range len(lower) {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

// Contains reports whether b contains lower (lower-case ASCII) in some letter case.
func Contains(b []byte, lower string) bool {
	for i := 0; i+len(lower) <= len(b); i++ {
		if Equal(b[i:i+len(lower)], lower) {
			return true
		}
	}
	return false
}
