package workers

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

// TestRPCErrorGolden pins the JSON-RPC mapping, which clients see, in
// testdata/rpc_errors.golden. Run with -update after a deliberate change.
func TestRPCErrorGolden(t *testing.T) {
	cases := []struct {
		name string
		err  error
	}{
		{"nil", nil},
		{"unrelated", io.EOF},
		{"dispatch overload", newOverloadError(3, DefaultRetryAfter)},
		{"overload rounds up to whole ms", newOverloadError(0, 1500*time.Microsecond)},
		{"overload never hints 0", newOverloadError(1, time.Nanosecond)},
		{"hand-built overload", &OverloadError{RetryAfter: 2 * time.Second}},
		{"wrapped overload", fmt.Errorf("route: %w", newOverloadError(5, 250*time.Millisecond))},
		{"bare ErrOverloaded", ErrOverloaded},
		{"ErrClosed", ErrClosed},
		{"wrapped ErrClosed", fmt.Errorf("session: %w", ErrClosed)},
		{"panic value", &PanicError{Value: "secret detail"}},
		{"panic error value", &PanicError{Value: io.ErrUnexpectedEOF}},
	}
	var out bytes.Buffer
	for _, tc := range cases {
		code, msg, data, ok := RPCError(tc.err)
		errText := "<nil>"
		if tc.err != nil {
			errText = tc.err.Error()
		}
		fmt.Fprintf(&out, "%s\n\tok=%v code=%d message=%s data=%s\n\terror=%s\n",
			tc.name, ok, code, strconv.Quote(msg), data, errText)
	}
	golden := filepath.Join("testdata", "rpc_errors.golden")
	if *update {
		if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(out.Bytes(), want) {
		t.Errorf("RPCError mapping changed; got:\n%s\nwant:\n%s", out.Bytes(), want)
	}
}

func TestErrorMatching(t *testing.T) {
	oe := newOverloadError(2, time.Second)
	pe := &PanicError{Value: io.ErrUnexpectedEOF}
	tests := []struct {
		err    error
		target error
		want   bool
	}{
		{oe, ErrOverloaded, true},
		{oe, ErrClosed, false},
		{fmt.Errorf("x: %w", oe), ErrOverloaded, true},
		{pe, ErrPanic, true},
		{pe, io.ErrUnexpectedEOF, true},
		{pe, ErrOverloaded, false},
		{&PanicError{Value: 42}, ErrPanic, true},
		{ErrClosed, ErrOverloaded, false},
	}
	for _, tc := range tests {
		if got := errors.Is(tc.err, tc.target); got != tc.want {
			t.Errorf("errors.Is(%v, %v) = %v, want %v", tc.err, tc.target, got, tc.want)
		}
	}
}

func TestRPCErrorZeroAlloc(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	var err error = newOverloadError(0, time.Second)
	if n := testing.AllocsPerRun(100, func() { _, _, _, _ = RPCError(err) }); n != 0 {
		t.Errorf("RPCError(*OverloadError) allocates %v times", n)
	}
}
