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

// OverloadError is what Dispatch returns when a shard's queue is full. It matches
// ErrOverloaded under errors.Is. Dispatch returns a shared, preallocated value (one
// per shard) so that refusing work costs no allocation exactly when the process is
// busiest: treat it as read-only.
type OverloadError struct {
	// Shard is the index of the shard whose queue was full.
	Shard int
	// RetryAfter is the hint given to clients (Config.RetryAfter).
	RetryAfter time.Duration

	msg string
}

func newOverloadError(shard int, retryAfter time.Duration) *OverloadError {
	return &OverloadError{
		Shard:      shard,
		RetryAfter: retryAfter,
		msg:        "workers: overloaded (shard " + strconv.Itoa(shard) + " queue full), retry after " + retryAfter.String(),
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
