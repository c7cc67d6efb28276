package workers

import (
	"errors"
	"fmt"
	"runtime/debug"
	"strconv"
	"time"
)

// Sentinel errors. Compare with errors.Is: the dispatcher returns richer values
// (*OverloadError, *PanicError) that match them.
var (
	// ErrOverloaded means the job was refused because its shard's queue was full. The
	// caller still owns the job; no method of it was or will be called. Dispatch
	// returns it as an *OverloadError carrying a retry hint.
	ErrOverloaded = errors.New("workers: overloaded")

	// ErrClosed is returned by Dispatch after Close has been called, and passed to
	// Job.Fail for accepted jobs that Close had to abandon (its context ended before
	// they could run).
	ErrClosed = errors.New("workers: dispatcher closed")

	// ErrPanic is matched by the *PanicError given to Job.Fail when Prepare or Run
	// panicked.
	ErrPanic = errors.New("workers: job panicked")
)

// JSON-RPC error codes and messages RPCError produces. The overload code sits in the
// implementation-defined server range (-32000..-32099) of JSON-RPC 2.0; MCP's own
// server codes start at -32001, so -32000 is free for it.
const (
	// CodeOverloaded answers a request refused by backpressure or shutdown. Clients
	// may retry after the hint in the error data.
	CodeOverloaded = -32000
	// CodeInternalError is JSON-RPC's "Internal error", used for handler panics.
	CodeInternalError = -32603

	MessageOverloaded = "overloaded"
	MessageClosed     = "shutting down"
	MessageInternal   = "internal error"
)

// OverloadError is what Dispatch returns when a shard's queue is full. It matches
// ErrOverloaded under errors.Is. Dispatch returns a shared, preallocated value (one
// per shard) so that refusing work costs no allocation exactly when the process is
// busiest: treat it as read-only.
type OverloadError struct {
	// Shard is the index of the shard whose queue was full.
	Shard int
	// RetryAfter is the hint given to clients (Config.RetryAfter).
	RetryAfter time.Duration

	msg  string
	data []byte
}

func newOverloadError(shard int, retryAfter time.Duration) *OverloadError {
	return &OverloadError{
		Shard:      shard,
		RetryAfter: retryAfter,
		msg:        "workers: overloaded (shard " + strconv.Itoa(shard) + " queue full), retry after " + retryAfter.String(),
		data:       appendRetryData(nil, retryAfter),
	}
}

func (e *OverloadError) Error() string {
	if e.msg == "" { // built by hand rather than by the dispatcher
		return "workers: overloaded, retry after " + e.RetryAfter.String()
	}
	return e.msg
}

// Is reports whether target is ErrOverloaded.
func (e *OverloadError) Is(target error) bool { return target == ErrOverloaded }

// PanicError is given to Job.Fail (and Config.PanicHook) when a job's Prepare or Run
// panicked. It matches ErrPanic under errors.Is and, when the panic value is an error,
// unwraps to it.
type PanicError struct {
	// Value is the value passed to panic.
	Value any
	// Stack is the panicking goroutine's stack, for logs. Never send it to a client.
	Stack []byte
}

func newPanicError(v any) *PanicError {
	return &PanicError{Value: v, Stack: debug.Stack()}
}

func (e *PanicError) Error() string { return fmt.Sprintf("workers: job panicked: %v", e.Value) }

// Is reports whether target is ErrPanic.
func (e *PanicError) Is(target error) bool { return target == ErrPanic }

// Unwrap returns the panic value if it is an error, so errors.Is/As see through it.
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}

// defaultRetryData is the hint used for a bare ErrOverloaded that carries none.
var defaultRetryData = appendRetryData(nil, DefaultRetryAfter)

// RPCError maps a dispatcher error to the JSON-RPC error a router should answer with,
// so the mapping lives in one place:
//
//	ErrOverloaded (*OverloadError) -> CodeOverloaded, "overloaded", {"retryAfterMs":N}
//	ErrClosed                      -> CodeOverloaded, "shutting down", no data
//	ErrPanic (*PanicError)         -> CodeInternalError, "internal error", no data
//
// The panic value is deliberately not echoed to the client. ok is false for any other
// error (including nil), which the caller maps itself. data, when not nil, is a
// complete JSON value shared between calls: do not modify it.
func RPCError(err error) (code int, message string, data []byte, ok bool) {
	if err == nil {
		return 0, "", nil, false
	}
	// Fast path for the value Dispatch actually returns, avoiding errors.As.
	if oe, isOE := err.(*OverloadError); isOE {
		return CodeOverloaded, MessageOverloaded, oe.retryData(), true
	}
	var oe *OverloadError
	switch {
	case errors.As(err, &oe):
		return CodeOverloaded, MessageOverloaded, oe.retryData(), true
	case errors.Is(err, ErrOverloaded):
		return CodeOverloaded, MessageOverloaded, defaultRetryData, true
	case errors.Is(err, ErrClosed):
		return CodeOverloaded, MessageClosed, nil, true
	case errors.Is(err, ErrPanic):
		return CodeInternalError, MessageInternal, nil, true
	}
	return 0, "", nil, false
}

func (e *OverloadError) retryData() []byte {
	if e.data == nil { // built by hand rather than by the dispatcher
		return appendRetryData(nil, e.RetryAfter)
	}
	return e.data
}

// appendRetryData appends {"retryAfterMs":N}, N being d in whole milliseconds rounded
// up (a hint of 0 would invite an immediate retry storm).
func appendRetryData(dst []byte, d time.Duration) []byte {
	ms := (d + time.Millisecond - 1) / time.Millisecond
	if ms < 1 {
		ms = 1
	}
	dst = append(dst, `{"retryAfterMs":`...)
	dst = strconv.AppendInt(dst, int64(ms), 10)
	return append(dst, '}')
}
