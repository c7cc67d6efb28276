package router

import (
	"errors"
	"sync/atomic"
	"time"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/workers"
)

// The router is where errors become JSON-RPC errors: the dispatcher's typed errors
// (workers knows nothing of JSON-RPC) and a fleet's *Error, mapped once here with the
// codes of codec's table.

// Messages of the errors the router makes from the dispatcher's.
const (
	MessageOverloaded = "overloaded"
	MessageClosed     = "shutting down"
	MessageInternal   = "internal error"
)

// Error is a JSON-RPC error made by the router or a fleet.
type Error struct {
	Code    int
	Message string
	Data    []byte // raw JSON, optional
}

func (e *Error) Error() string { return e.Message }

// retryHint is the data of an overload error for one RetryAfter, kept so that refusing
// work allocates nothing exactly when the process is busiest (one dispatcher has one
// RetryAfter: the hint is made once).
type retryHint struct {
	after time.Duration
	data  []byte // {"retryAfterMs":N}, shared: never modified
}

// errorMapper maps errors to JSON-RPC errors (errorOf), keeping the last retryHint made.
// Safe for concurrent use.
type errorMapper struct{ hint atomic.Pointer[retryHint] }

// retryData returns the overload error data for d.
func (h *errorMapper) retryData(d time.Duration) []byte {
	if last := h.hint.Load(); last != nil && last.after == d {
		return last.data
	}
	hint := &retryHint{after: d, data: codec.AppendRetryData(nil, d)}
	h.hint.Store(hint)
	return hint.data
}

// errorOf maps an error from the dispatcher or a fleet to a JSON-RPC error:
//
//	workers.ErrOverloaded (*OverloadError) -> CodeOverloaded, "overloaded", {"retryAfterMs":N}
//	workers.ErrClosed                      -> CodeOverloaded, "shutting down", no data
//	workers.ErrPanic (*PanicError)         -> CodeInternalError, "internal error", no data
//	*Error                                 -> its code, message and data
//	anything else                          -> CodeInternalError with the error's text
//
// The panic value is deliberately not echoed to the client. data, when not nil, may be
// shared between calls: do not modify it.
func (h *errorMapper) errorOf(err error) (code int, msg string, data []byte) {
	// Fast path for the value Dispatch actually returns, avoiding errors.As.
	if oe, ok := err.(*workers.OverloadError); ok {
		return codec.CodeOverloaded, MessageOverloaded, h.retryData(oe.RetryAfter)
	}
	var oe *workers.OverloadError
	var re *Error
	switch {
	case errors.As(err, &oe):
		return codec.CodeOverloaded, MessageOverloaded, h.retryData(oe.RetryAfter)
	case errors.Is(err, workers.ErrOverloaded):
		return codec.CodeOverloaded, MessageOverloaded, h.retryData(workers.DefaultRetryAfter)
	case errors.Is(err, workers.ErrClosed):
		return codec.CodeOverloaded, MessageClosed, nil
	case errors.Is(err, workers.ErrPanic):
		return codec.CodeInternalError, MessageInternal, nil
	case errors.As(err, &re):
		return re.Code, re.Message, re.Data
	}
	return codec.CodeInternalError, err.Error(), nil
}
