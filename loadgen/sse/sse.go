// Package sse reads Server-Sent Events streams (the text/event-stream format of the
// WHATWG HTML standard) for mcpload's client transports.
//
// The core is Parser, a resumable byte state machine: it accepts input in chunks split
// at any point (a CR of a CRLF pair may end one chunk and its LF start the next) and
// yields one event at a time, so the same code serves a fully buffered POST response
// body and a long-lived GET stream read in pieces. Reader wraps a Parser around an
// io.Reader. Neither allocates per event once its buffers have grown to the largest
// event seen.
package sse

import (
	"bytes"
	"errors"
	"io"
	"strconv"
)

// ErrTooLarge is returned when a single line or the data of a single event grows past
// the parser's limit. The stream cannot be resynchronised after it, so callers drop
// the connection.
var ErrTooLarge = errors.New("sse: event too large")

// DefaultMaxEvent bounds one event's data (and one line) when no limit is given.
const DefaultMaxEvent = 4 << 20

// Event is one dispatched event. Its slices alias the parser's buffers and are valid
// until the next call to Feed (or Reader.Next).
type Event struct {
	// Type is the event type ("message" when the stream did not name one).
	Type []byte
	// Data is the event data, lines joined with "\n", without the final newline.
	Data []byte
	// ID is the stream's last event ID at dispatch time. Per the standard it persists
	// across events until an "id" field changes it, so it is what a client sends back
	// as Last-Event-ID when it reconnects.
	ID []byte
}

var messageType = []byte("message")

// Parser is the SSE state machine. The zero value is ready to use with
// DefaultMaxEvent; a Parser is not safe for concurrent use.
type Parser struct {
	// MaxEvent bounds one line and one event's data in bytes; zero means
	// DefaultMaxEvent.
	MaxEvent int

	line    []byte // the incomplete current line carried over between chunks
	data    []byte // data buffer of the event being assembled
	typ     []byte // event type buffer of the event being assembled
	lastID  []byte // last event ID buffer (persists across events)
	hasData bool   // at least one data field was seen for the current event
	afterCR bool   // the previous chunk ended in CR: skip one LF at the next start
	bomDone bool   // the stream start was checked for a byte order mark
	bomPos  int    // bytes of a byte order mark matched so far (it may be split)
	inLine  bool   // line holds a partial line (it may legitimately be empty so far)

	// Retry is the most recent valid "retry" field in milliseconds; HasRetry says
	// whether one was seen. It is the server's requested reconnection delay.
	Retry    int
	HasRetry bool

	ev Event
}

// Reset clears all state, including the last event ID and retry, keeping the buffers.
func (p *Parser) Reset() {
	p.line = p.line[:0]
	p.data = p.data[:0]
	p.typ = p.typ[:0]
	p.lastID = p.lastID[:0]
	p.hasData, p.afterCR, p.bomDone, p.inLine = false, false, false, false
	p.bomPos, p.Retry, p.HasRetry = 0, 0, false
}

// LastEventID returns the last event ID seen so far (valid until the next Feed).
func (p *Parser) LastEventID() []byte { return p.lastID }

func (p *Parser) max() int {
	if p.MaxEvent > 0 {
		return p.MaxEvent
	}
	return DefaultMaxEvent
}

// Feed consumes input from b until it has dispatched one event or used up b. It returns
// the number of bytes consumed and the event, or nil when b ended before an event was
// complete (all of b was then consumed and buffered as needed). Call Feed again with
// the unconsumed remainder, or the next chunk, to continue.
func (p *Parser) Feed(b []byte) (int, *Event, error) {
	n := 0
	if !p.bomDone {
		n = p.skipBOM(b)
	}
	if p.afterCR && n < len(b) {
		p.afterCR = false
		if b[n] == '\n' {
			n++
		}
	}
	for n < len(b) {
		rest := b[n:]
		i := indexEOL(rest)
		if i < 0 {
			if len(p.line)+len(rest) > p.max() {
				return n, nil, ErrTooLarge
			}
			p.line = append(p.line, rest...)
			p.inLine = true
			return len(b), nil, nil
		}
		// The limit applies to the whole line whether or not it arrived in one chunk,
		// so that chunking never changes the outcome.
		if len(p.line)+i > p.max() {
			return n, nil, ErrTooLarge
		}
		var line []byte
		if p.inLine {
			p.line = append(p.line, rest[:i]...)
			line = p.line
		} else {
			line = rest[:i]
		}
		n += i + 1
		if rest[i] == '\r' {
			if n < len(b) {
				if b[n] == '\n' {
					n++
				}
			} else {
				p.afterCR = true
			}
		}
		ev, err := p.processLine(line)
		p.line = p.line[:0]
		p.inLine = false
		if err != nil {
			return n, nil, err
		}
		if ev != nil {
			return n, ev, nil
		}
	}
	return n, nil, nil
}

var bom = []byte{0xEF, 0xBB, 0xBF}

// skipBOM strips one leading UTF-8 byte order mark, which may arrive split across
// chunks, and returns how many bytes of b it consumed. When the stream turns out not
// to start with a BOM, the bytes matched so far are line content.
func (p *Parser) skipBOM(b []byte) int {
	n := 0
	for n < len(b) && p.bomPos < len(bom) {
		if b[n] != bom[p.bomPos] {
			p.bomDone = true
			if p.bomPos > 0 {
				p.line = append(p.line[:0], bom[:p.bomPos]...)
				p.inLine = true
			}
			return n
		}
		p.bomPos++
		n++
	}
	if p.bomPos == len(bom) {
		p.bomDone = true
	}
	return n
}

// indexEOL finds the first CR or LF.
func indexEOL(b []byte) int {
	for i, c := range b {
		if c == '\n' || c == '\r' {
			return i
		}
	}
	return -1
}

// processLine interprets one complete line and returns the dispatched event, if any.
func (p *Parser) processLine(line []byte) (*Event, error) {
	if len(line) == 0 {
		return p.dispatch(), nil
	}
	if line[0] == ':' {
		return nil, nil // comment
	}
	name, value := line, line[:0]
	if c := bytes.IndexByte(line, ':'); c >= 0 {
		name, value = line[:c], line[c+1:]
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
	}
	switch string(name) { // no allocation: the compiler optimises string(b) in switch
	case "data":
		if len(p.data)+len(value)+1 > p.max() {
			return nil, ErrTooLarge
		}
		p.data = append(p.data, value...)
		p.data = append(p.data, '\n')
		p.hasData = true
	case "event":
		p.typ = append(p.typ[:0], value...)
	case "id":
		if bytes.IndexByte(value, 0) < 0 {
			p.lastID = append(p.lastID[:0], value...)
		}
	case "retry":
		if ms, ok := digits(value); ok {
			p.Retry, p.HasRetry = ms, true
		}
	}
	return nil, nil
}

// digits parses a non-empty run of ASCII digits, as the standard requires of retry.
func digits(b []byte) (int, bool) {
	if len(b) == 0 || len(b) > 9 {
		return 0, false
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	v, err := strconv.Atoi(string(b))
	return v, err == nil
}

// dispatch ends the current event at a blank line. An event without data fields is not
// dispatched (the standard says so; it is how an id-only priming event behaves), but
// its id has already updated the last event ID.
func (p *Parser) dispatch() *Event {
	if !p.hasData {
		p.typ = p.typ[:0]
		return nil
	}
	p.ev.Data = p.data[:len(p.data)-1]
	p.ev.Type = messageType
	if len(p.typ) > 0 {
		p.ev.Type = p.typ
	}
	p.ev.ID = p.lastID
	// The buffers are reset lazily by the next Feed: the event's slices alias them.
	p.data = p.data[:0]
	p.typ = p.typ[:0]
	p.hasData = false
	return &p.ev
}

// Reader reads events from an io.Reader.
type Reader struct {
	r   io.Reader
	buf []byte
	off int // start of unconsumed bytes in buf
	end int // end of valid bytes in buf
	err error
	P   Parser
}

// NewReader returns a Reader with a read buffer of bufSize bytes (4 KiB when <= 0) and
// a per-event limit of maxEvent bytes (DefaultMaxEvent when <= 0).
func NewReader(r io.Reader, bufSize, maxEvent int) *Reader {
	if bufSize <= 0 {
		bufSize = 4096
	}
	rd := &Reader{r: r, buf: make([]byte, bufSize)}
	rd.P.MaxEvent = maxEvent
	return rd
}

// Reset makes the Reader read from r with fresh parser state, keeping its buffers.
func (rd *Reader) Reset(r io.Reader) {
	rd.r, rd.off, rd.end, rd.err = r, 0, 0, nil
	rd.P.Reset()
}

// Next returns the next event. The event is valid until the next call. At the end of
// the stream it returns io.EOF (an incomplete trailing event is discarded, as the
// standard requires); other errors are returned as they come.
func (rd *Reader) Next() (*Event, error) {
	for {
		if rd.off < rd.end {
			n, ev, err := rd.P.Feed(rd.buf[rd.off:rd.end])
			rd.off += n
			if err != nil {
				rd.err = err
				return nil, err
			}
			if ev != nil {
				return ev, nil
			}
		}
		if rd.err != nil {
			return nil, rd.err
		}
		rd.off, rd.end = 0, 0
		// A reader may return (0, nil); bound the retries so a broken reader cannot
		// spin forever.
		for tries := 0; ; tries++ {
			n, err := rd.r.Read(rd.buf)
			rd.end = n
			if err != nil {
				rd.err = err
				break
			}
			if n > 0 {
				break
			}
			if tries >= 100 {
				rd.err = io.ErrNoProgress
				break
			}
		}
	}
}
