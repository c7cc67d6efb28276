package upstream

import (
	"errors"
	"io"
	"sync"

	"github.com/mcprouter/mcprouter/transport/sse"
)

// sseEvent is one event that carries data. Its slices are valid until the next call to
// next.
type sseEvent struct {
	Event []byte // event type; empty means "message"
	Data  []byte // data lines joined with \n
}

// isMessage reports whether the event carries a JSON-RPC message: MCP servers send them
// as the default event type, which some spell out as "message".
func (e *sseEvent) isMessage() bool {
	return len(e.Event) == 0 || string(e.Event) == "message"
}

// sseReader reads the events of a backend's text/event-stream body with transport/sse's
// parser, through a pooled read buffer (a router reads one stream per SSE reply, so
// the buffer is worth reusing). Memory is bounded by the parser's maximum event size.
type sseReader struct {
	r          io.Reader
	p          *sse.Parser
	buf        []byte
	start, end int
	err        error
	// lastID is the stream's last event id (it persists across events and is what a
	// reconnecting client sends as Last-Event-ID); valid until the next call to next.
	lastID []byte
	// retry is the server's reconnection time in milliseconds, 0 when never sent.
	retry int
}

// sseBufSize bounds one read from the stream, not the size of an event.
const sseBufSize = 16 << 10

// sseReaders are pooled with their parser and read buffer: a router reads one stream
// per SSE reply.
var sseReaders = sync.Pool{New: func() any {
	return &sseReader{p: new(sse.Parser), buf: make([]byte, sseBufSize)}
}}

// maxEmptyReads bounds consecutive reads that return neither data nor an error, so that
// a misbehaving reader cannot spin next forever.
const maxEmptyReads = 100

func newSSEReader(r io.Reader, max int) *sseReader {
	sr := sseReaders.Get().(*sseReader)
	sr.r = r
	*sr.p = *sse.NewParser(max) // a fresh parser, copied in place: no allocation
	return sr
}

// release returns the reader to its pool; it must not be used afterwards.
func (r *sseReader) release() {
	p, buf := r.p, r.buf
	*r = sseReader{p: p, buf: buf}
	sseReaders.Put(r)
}

// next returns the next event that has data. Events without data (the SSE priming event
// of 2025-11-25, a bare id or retry) update lastID and retry and are not returned. At
// the end of the stream it returns io.EOF; an event longer than the maximum ends the
// stream with an error matching ErrTooLarge.
func (r *sseReader) next() (sseEvent, error) {
	buf := r.buf
	var ev sse.Event
	empty := 0
	for {
		if r.start < r.end {
			n, ok, err := r.p.Feed(buf[r.start:r.end], &ev)
			r.start += n
			r.lastID = r.p.LastEventID()
			if rt := r.p.Retry(); rt > 0 {
				r.retry = rt
			}
			if err != nil {
				if errors.Is(err, sse.ErrEventTooLarge) {
					err = errors.Join(ErrTooLarge, err)
				}
				r.err = err
				return sseEvent{}, err
			}
			if ok && len(ev.Data) > 0 {
				return sseEvent{Event: ev.Event, Data: ev.Data}, nil
			}
			if ok {
				continue
			}
		}
		if r.err != nil {
			return sseEvent{}, r.err
		}
		n, err := r.r.Read(buf)
		r.start, r.end = 0, n
		switch {
		case err != nil:
			r.err = err
		case n == 0:
			if empty++; empty >= maxEmptyReads {
				r.err = io.ErrNoProgress
			}
		default:
			empty = 0
		}
	}
}
