package sse

import (
	"bytes"
	"sync/atomic"
)

// Shared is an event encoded once for many streams (Stream.PublishShared): a notification
// fanned out to every subscribed session is one allocation, not one per session, and
// their rings hold references to it. Each stream writes its own id after it when it
// sends it. A Shared is immutable, safe to share between goroutines.
type Shared struct {
	body []byte // event and data lines, allocated to size
	name string // the event name it was made with
	// data is the part of body that equals the data it was made with, when that data
	// is one line (body is then "data: <data>\n"); nil otherwise. EventCache compares it.
	data []byte
}

// NewShared encodes an event for PublishShared. data is copied.
func NewShared(event string, data []byte) *Shared {
	n := len(event) + len(data) + frameSlack
	e := &Shared{body: appendBody(make([]byte, 0, n), event, data), name: event}
	if lineEnd(data) == len(data) {
		e.data = e.body[len(e.body)-1-len(data) : len(e.body)-1]
	}
	return e
}

// is reports whether e is the encoding of event and data.
func (e *Shared) is(event string, data []byte) bool {
	return e.data != nil && e.name == event && bytes.Equal(e.data, data)
}

// SharedCache remembers the last event encoded through it, so that one message handed to
// many streams in turn (a change notice sent to every subscribed session, each with its
// own stream) is encoded once and shared by their rings. It is a cache of one: messages
// that interleave are encoded again, never confused (it compares their bytes). The zero
// value is ready; safe for concurrent use.
type SharedCache struct{ last atomic.Pointer[Shared] }

// Get returns the encoding of event and data: the last one if it is the same event,
// else a new one, which becomes the last. A nil cache encodes every time.
func (c *SharedCache) Get(event string, data []byte) *Shared {
	if c == nil {
		return NewShared(event, data)
	}
	if e := c.last.Load(); e != nil && e.is(event, data) {
		return e
	}
	e := NewShared(event, data)
	c.last.Store(e)
	return e
}
