package workers

import (
	"errors"
	"fmt"
	"io"
	"testing"
	"time"
)

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
