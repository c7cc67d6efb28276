// Package defaults holds the one rule of the project's numeric settings: zero, or
// anything below, means the documented default. A configuration's defaults step fills
// each count, size or duration with Positive; strings, pointers and other fields whose
// zero value means the default take cmp.Or. Any goroutine may call it.
package defaults

// Number is what Positive fills: counts, sizes, durations.
type Number interface {
	~int | ~int64
}

// Positive returns v when it is above zero, def otherwise.
func Positive[T Number](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}
