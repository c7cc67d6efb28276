package sse

import (
	"bytes"
	"errors"
	"io"
	"math"
)

// ErrEventTooLarge is returned by Parser.Feed and Reader.Next when one event (its data,
// event name and id together) exceeds the configured maximum. The parser is unusable
// afterwards: the stream cannot be resynchronised reliably.
var ErrEventTooLarge = errors.New("sse: event too large")

// DefaultMaxEvent is the event size bound used when none is given: MCP results can be
// large (resources, embedded images), so this is generous.
const DefaultMaxEvent = 16 << 20

// keepBuf is the largest data buffer a Parser keeps between events.
const keepBuf = 1 << 20

// Event is one dispatched event. Its slices are views into the parser's buffers, valid
// until the next call to Feed or Next; copy what must outlive that.
type Event struct {
	// ID is the stream's last event ID as of this event: set by this event's id field
	// or, if it had none, by an earlier one (ids persist, per the WHATWG rules). It is
	// what a client sends as Last-Event-ID when it reconnects.
	ID []byte
	// Event is the event type; empty means the default type, "message".
	Event []byte
	// Data is the event's data, its lines joined with LF. Empty data is a valid event:
	// the MCP priming event is one, and clients skip it.
	Data []byte
	// Retry is the reconnection time in milliseconds most recently set by the stream,
	// or -1 if it never set one.
	Retry int
	// HasID reports whether this event's own block carried a valid id field.
	HasID bool
}

// Parser states. The parser is a resumable byte state machine in the style of the NATS
// protocol parser: every state can be suspended at any byte and resumed by the next
// Feed, so the result never depends on how the input was chunked.
type state uint8

const (
	stBOM     state = iota // start of stream: matching an optional UTF-8 BOM
	stLine                 // at the start of a line
	stName                 // in a field name
	stSpace                // just after the colon: one space is skipped
	stValue                // in a field value
	stComment              // in a comment line, or the value of an ignored field
)

// Known field names.
type field uint8

const (
	fUnknown field = iota
	fData
	fEvent
	fID
	fRetry
)

var bom = [3]byte{0xEF, 0xBB, 0xBF}

// Parser turns event-stream bytes into events, fed in chunks of any size. It follows the
// WHATWG rules: an optional leading BOM, CR, LF and CRLF line ends, comments, fields
// without a colon, data lines joined with LF, ids containing NUL ignored, retry values of
// ASCII digits only, dispatch on a blank line, and an incomplete event at the end of the
// stream discarded. Bytes are not checked to be UTF-8: data is handed on as received.
//
// Memory is bounded by the maximum event size: comments and unknown fields are skipped
// without being buffered, whatever their length.
//
// The zero Parser is ready to use with DefaultMaxEvent. A Parser is not safe for
// concurrent use.
type Parser struct {
	max   int
	err   error
	st    state
	nbom  uint8 // BOM bytes matched so far
	cr    bool  // the previous line ended with CR: skip an LF that follows
	fld   field // field of the current line
	nlen  uint8 // field name length (saturating)
	name  [5]byte
	reset bool // an event was handed out: clear data and event type before going on

	data   []byte // data buffer
	event  []byte // event type buffer
	idTmp  []byte // value of the id line being read
	idNul  bool   // idTmp contains NUL
	idBuf  []byte // last event ID buffer (set by complete id lines)
	lastID []byte // last event ID string (set at each dispatch)
	idSet  bool   // the current block had a valid id line

	retryVal int
	retryOK  bool // retry value so far is one or more digits
	retry    int  // reconnection time, -1 if never set
	retrySet bool // retry has been set at least once (the zero Parser has retry 0)
}

// NewParser returns a Parser whose events may not exceed maxEvent bytes (data, event name
// and id together); maxEvent <= 0 means DefaultMaxEvent.
func NewParser(maxEvent int) *Parser {
	p := &Parser{}
	p.max = maxEvent
	return p
}

// LastEventID returns the stream's last event ID string: what a client sends as
// Last-Event-ID when it reconnects. It is updated at every blank line that follows an id
// field, even when no event is dispatched (an id-only block).
func (p *Parser) LastEventID() []byte { return p.lastID }

// Retry returns the reconnection time in milliseconds last set by the stream, or -1.
func (p *Parser) Retry() int {
	if !p.retrySet {
		return -1
	}
	return p.retry
}

func (p *Parser) limit() int {
	if p.max <= 0 {
		return DefaultMaxEvent
	}
	return p.max
}

// Feed consumes b until it has consumed all of it or dispatched one event, and returns
// the number of bytes consumed. When ok is true, *ev holds the event, valid until the
// next call; call Feed again with b[n:] to go on. Once Feed returns an error it returns
// that error forever.
func (p *Parser) Feed(b []byte, ev *Event) (n int, ok bool, err error) {
	if p.err != nil {
		return 0, false, p.err
	}
	if p.reset {
		p.reset = false
		if cap(p.data) > keepBuf {
			p.data = nil // one huge event should not pin its memory for the stream's life
		}
		p.data = p.data[:0]
		p.event = p.event[:0]
	}
	i := 0
	for i < len(b) {
		c := b[i]
		if p.cr {
			p.cr = false
			if c == '\n' {
				i++
				continue
			}
		}
		switch p.st {
		case stBOM:
			if c == bom[p.nbom] {
				p.nbom++
				i++
				if int(p.nbom) == len(bom) {
					p.st = stLine
				}
				continue
			}
			p.st = stLine
			if p.nbom > 0 {
				// A partial BOM is the start of a field name that can match no known
				// field (they are ASCII): carry it on as such.
				p.st, p.fld = stName, fUnknown
				p.nlen = p.nbom
				copy(p.name[:], bom[:p.nbom])
			}
			// reprocess c in the new state
		case stLine:
			switch c {
			case '\r', '\n':
				p.cr = c == '\r'
				i++
				if p.dispatch(ev) {
					return i, true, nil
				}
			case ':':
				p.st = stComment
				i++
			default:
				p.st = stName
				p.nlen = 1
				p.name[0] = c
				i++
			}
		case stName:
			// Field names are short; anything longer than 5 bytes is unknown.
			j := i
			for j < len(b) && b[j] != ':' && b[j] != '\r' && b[j] != '\n' {
				if p.nlen < uint8(len(p.name)) {
					p.name[p.nlen] = b[j]
				}
				if p.nlen < 255 {
					p.nlen++
				}
				j++
			}
			i = j
			if i == len(b) {
				continue
			}
			p.fld = p.lookup()
			p.beginValue()
			if b[i] == ':' {
				p.st = stSpace
				i++
				continue
			}
			// A field without a colon: the whole line is the name, the value is empty.
			p.cr = b[i] == '\r'
			i++
			if err := p.endLine(); err != nil {
				return i, false, err
			}
		case stSpace:
			p.st = stValue
			if c == ' ' {
				i++
			}
		case stValue:
			rest := b[i:]
			e := lineEnd(rest)
			if err := p.value(rest[:e]); err != nil {
				return i, false, err
			}
			i += e
			if e < len(rest) {
				p.cr = rest[e] == '\r'
				i++
				if err := p.endLine(); err != nil {
					return i, false, err
				}
			}
		case stComment:
			e := lineEnd(b[i:])
			i += e
			if i < len(b) {
				p.cr = b[i] == '\r'
				p.st = stLine
				i++
			}
		}
	}
	return i, false, nil
}

// lookup maps the field name read so far to a known field.
func (p *Parser) lookup() field {
	switch n := p.name[:min(int(p.nlen), len(p.name))]; {
	case p.nlen == 4 && string(n) == "data":
		return fData
	case p.nlen == 5 && string(n) == "event":
		return fEvent
	case p.nlen == 2 && string(n) == "id":
		return fID
	case p.nlen == 5 && string(n) == "retry":
		return fRetry
	}
	return fUnknown
}

// beginValue prepares the buffer of the current field for its value.
func (p *Parser) beginValue() {
	switch p.fld {
	case fEvent:
		p.event = p.event[:0]
	case fID:
		p.idTmp, p.idNul = p.idTmp[:0], false
	case fRetry:
		p.retryVal, p.retryOK = 0, false
	}
}

// value takes one piece of the current field's value (no line ends in it).
func (p *Parser) value(v []byte) error {
	if len(v) == 0 {
		return nil
	}
	switch p.fld {
	case fData:
		if err := p.grow(len(v)); err != nil {
			return err
		}
		p.data = append(p.data, v...)
	case fEvent:
		if err := p.grow(len(v)); err != nil {
			return err
		}
		p.event = append(p.event, v...)
	case fID:
		if err := p.grow(len(v)); err != nil {
			return err
		}
		if bytes.IndexByte(v, 0) >= 0 {
			p.idNul = true
		}
		p.idTmp = append(p.idTmp, v...)
	case fRetry:
		p.retryDigits(v)
	}
	return nil
}

// retryDigits accumulates a piece of a retry value. The first non-digit spoils it for
// good (the field is then ignored); large values saturate rather than wrap.
func (p *Parser) retryDigits(v []byte) {
	if p.retryVal < 0 {
		return
	}
	for _, c := range v {
		if c < '0' || c > '9' {
			p.retryVal, p.retryOK = -1, false
			return
		}
		if p.retryVal > (math.MaxInt32-9)/10 {
			p.retryVal = math.MaxInt32
		} else {
			p.retryVal = p.retryVal*10 + int(c-'0')
		}
		p.retryOK = true
	}
}

// grow checks that n more bytes keep the pending event within the bound.
func (p *Parser) grow(n int) error {
	if len(p.data)+len(p.event)+len(p.idTmp)+n > p.limit() {
		p.err = ErrEventTooLarge
		return p.err
	}
	return nil
}

// endLine completes the current field line.
func (p *Parser) endLine() error {
	p.st = stLine
	switch p.fld {
	case fData:
		if err := p.grow(1); err != nil {
			return err
		}
		p.data = append(p.data, '\n')
	case fID:
		if !p.idNul {
			p.idBuf = append(p.idBuf[:0], p.idTmp...)
			p.idSet = true
		}
		p.idTmp = p.idTmp[:0]
	case fRetry:
		if p.retryOK {
			p.retry, p.retrySet = p.retryVal, true
		}
	}
	return nil
}

// dispatch handles a blank line, reporting whether it produced an event.
func (p *Parser) dispatch(ev *Event) bool {
	hasID := p.idSet
	if hasID {
		p.lastID = append(p.lastID[:0], p.idBuf...)
		p.idSet = false
	}
	if len(p.data) == 0 {
		p.event = p.event[:0]
		return false
	}
	*ev = Event{
		ID:    p.lastID,
		Event: p.event,
		Data:  p.data[:len(p.data)-1],
		Retry: p.Retry(),
		HasID: hasID,
	}
	p.reset = true
	return true
}

// Reader reads events from an io.Reader through its own buffer. It is the client side
// of an event stream: a backend's SSE reply or a test reading what a Stream wrote.
// A Reader is not safe for concurrent use.
type Reader struct {
	r          io.Reader
	buf        []byte
	start, end int
	p          Parser
	err        error
}

// readBufSize is the Reader's read buffer: events are copied out of it into the parser's
// buffers, so it bounds syscall size, not event size.
const readBufSize = 16 << 10

// maxEmptyReads bounds consecutive reads that return nothing and no error, so that a
// misbehaving io.Reader cannot spin Next forever.
const maxEmptyReads = 100

// NewReader returns a Reader of r whose events may not exceed maxEvent bytes; maxEvent
// <= 0 means DefaultMaxEvent.
func NewReader(r io.Reader, maxEvent int) *Reader {
	rd := &Reader{r: r, buf: make([]byte, readBufSize)}
	rd.p.max = maxEvent
	return rd
}

// Next returns the next event. Its slices are valid until the next call. At the end of
// the stream it returns io.EOF (an incomplete last event is discarded, as the WHATWG
// rules say); a read error is returned as is, after the events before it.
func (r *Reader) Next() (Event, error) {
	var ev Event
	empty := 0
	for {
		if r.start < r.end {
			n, ok, err := r.p.Feed(r.buf[r.start:r.end], &ev)
			r.start += n
			if err != nil {
				r.err = err
				return Event{}, err
			}
			if ok {
				return ev, nil
			}
		}
		if r.err != nil {
			return Event{}, r.err
		}
		n, err := r.r.Read(r.buf)
		r.start, r.end = 0, n
		if err != nil {
			r.err = err
		} else if n == 0 {
			if empty++; empty >= maxEmptyReads {
				r.err = io.ErrNoProgress
			}
		}
	}
}

// LastEventID returns the stream's last event ID: what to send as Last-Event-ID to resume.
func (r *Reader) LastEventID() []byte { return r.p.LastEventID() }

// Retry returns the reconnection time in milliseconds last set by the stream, or -1.
func (r *Reader) Retry() int { return r.p.Retry() }
