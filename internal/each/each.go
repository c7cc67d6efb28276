// Package each holds the one loop that turns every element of a slice into a value
// with a function that may fail, stopping at the first failure: reading a figure of
// each process, parsing each expression. Any goroutine may call it.
package each

// Map returns f of every element of in, in their order, or the first error f returns
// (and no values). An empty in gives an empty, non-nil slice.
func Map[S, T any](in []S, f func(S) (T, error)) ([]T, error) {
	out := make([]T, 0, len(in))
	for _, s := range in {
		v, err := f(s)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}
