// Package rpccheck checks, cheaply enough for a benchmark's timed loop, that an answer is
// the JSON-RPC success the benchmark asked for. A benchmark that only looked at the HTTP
// status or the body length would time errors just as happily as calls.
package rpccheck

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/mcprouter/mcprouter/codec"
)

// ErrNotResult is wrapped by every error Result returns.
var ErrNotResult = errors.New("not the expected JSON-RPC result")

// Result reports whether body is a JSON-RPC success response ("result", no "error")
// whose id is the raw token id (`1`, `"a"`). m is scratch space the caller reuses, so
// that a correct answer costs one scan and no allocation; only a wrong answer allocates,
// for its error.
func Result(m *codec.Message, body, id []byte) error {
	if err := codec.Scan(body, m); err != nil {
		return fmt.Errorf("%w: %v: %q", ErrNotResult, err, clip(body))
	}
	switch {
	case m.Kind == codec.KindError:
		return fmt.Errorf("%w: error response %s", ErrNotResult, clip(m.Error))
	case m.Kind != codec.KindResult:
		return fmt.Errorf("%w: a %s, not a response: %q", ErrNotResult, m.Kind, clip(body))
	case !bytes.Equal(m.ID, id):
		return fmt.Errorf("%w: id %s, want %s", ErrNotResult, m.ID, id)
	}
	return nil
}

// clip keeps error messages short when a body is large.
func clip(b []byte) []byte {
	const n = 200
	if len(b) > n {
		return b[:n]
	}
	return b
}
