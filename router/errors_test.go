package router

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/internal/golden"
	"github.com/mcprouter/mcprouter/workers"
)

// TestErrorOfGolden pins the mapping of dispatcher and fleet errors to JSON-RPC errors,
// which clients see, in testdata/errors.golden. Run with -update after a deliberate
// change.
func TestErrorOfGolden(t *testing.T) {
	cases := []struct {
		name string
		err  error
	}{
		{"unrelated", io.EOF},
		{"overload", &workers.OverloadError{RetryAfter: workers.DefaultRetryAfter}},
		{"overload rounds up to whole ms", &workers.OverloadError{RetryAfter: 1500 * time.Microsecond}},
		{"overload never hints 0", &workers.OverloadError{RetryAfter: time.Nanosecond}},
		{"wrapped overload", fmt.Errorf("route: %w", &workers.OverloadError{RetryAfter: 250 * time.Millisecond})},
		{"bare ErrOverloaded", workers.ErrOverloaded},
		{"ErrClosed", workers.ErrClosed},
		{"wrapped ErrClosed", fmt.Errorf("session: %w", workers.ErrClosed)},
		{"panic value", &workers.PanicError{Value: "secret detail"}},
		{"panic error value", &workers.PanicError{Value: io.ErrUnexpectedEOF}},
		{"fleet error", &Error{Code: -32010, Message: "backend unavailable", Data: []byte(`{"backend":"b"}`)}},
		{"wrapped fleet error", fmt.Errorf("x: %w", &Error{Code: -32011, Message: "backend timed out"})},
	}
	var m errorMapper
	var out bytes.Buffer
	for _, tc := range cases {
		code, msg, data := m.errorOf(tc.err)
		fmt.Fprintf(&out, "%s\n\tcode=%d message=%s data=%s\n", tc.name, code, strconv.Quote(msg), data)
	}
	golden.Check(t, filepath.Join("testdata", "errors.golden"), out.Bytes())
}

// TestErrorOfOverloadZeroAlloc: refusing work allocates nothing once the hint for the
// dispatcher's RetryAfter is made, and a change of RetryAfter gets its own hint.
func TestErrorOfOverloadZeroAlloc(t *testing.T) {
	var m errorMapper
	var err error = &workers.OverloadError{RetryAfter: time.Second}
	if _, _, data := m.errorOf(err); string(data) != `{"retryAfterMs":1000}` {
		t.Fatalf("data %s", data)
	}
	if _, _, data := m.errorOf(&workers.OverloadError{RetryAfter: 3 * time.Millisecond}); string(data) != `{"retryAfterMs":3}` {
		t.Fatalf("data after a change of RetryAfter: %s", data)
	}
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	if n := testing.AllocsPerRun(100, func() { _, _, _ = m.errorOf(err) }); n != 0 {
		t.Errorf("errorOf(*OverloadError) allocates %v times", n)
	}
	if !errors.Is(err, workers.ErrOverloaded) {
		t.Error("OverloadError does not match ErrOverloaded")
	}
}
