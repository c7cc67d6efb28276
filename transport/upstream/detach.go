package upstream

import (
	"context"
	"errors"
)

// Detacher lets a Send return before the end of its reply: it is what a caller that
// must get back to other work while a backend streams (a client's HTTP request's own
// goroutine, which serves the request's event stream) puts in the Send's context, with
// Deadline.Detach or WithDetach.
//
// Under it, an HTTPConn's Send of a request whose reply turns out to be an event stream
// (Content-Type text/event-stream) hands the stream's reading to a goroutine of its own
// and returns ErrDetached at once; the progress, logs and requests to the client the
// backend sends on the stream are delivered to the Sink from that goroutine as they
// come, as they would be from Send's. Once the stream has brought the response, or
// ended without it (after the resumptions a broken stream gets with Last-Event-ID), the
// goroutine calls Detached, once, with what Send would have returned. The Send's
// context and message must stay valid until then: the reading goes on under the
// context, and may resume with the request's id, which is a view into the message. A
// JSON reply is read by Send itself, as without a Detacher.
type Detacher interface {
	Detached(err error)
}

// ErrDetached is what Send returns when it handed the reply's stream to a goroutine of
// its own (Detacher): not a failure, the outcome comes to Detached.
var ErrDetached = errors.New("upstream: the reply stream is read on a goroutine of its own")

type detachKey struct{}

// WithDetach returns a context under which Send may hand a streamed reply to d. A
// Deadline needs none: Deadline.Detach sets it without another context.
func WithDetach(ctx context.Context, d Detacher) context.Context {
	return context.WithValue(ctx, detachKey{}, d)
}

// detacherOf is the Detacher in ctx, or nil.
func detacherOf(ctx context.Context) Detacher {
	if dl, ok := ctx.(*Deadline); ok {
		return dl.detach
	}
	d, _ := ctx.Value(detachKey{}).(Detacher)
	return d
}
