package codec

import (
	"encoding/binary"
	"io"
	"math"
	"math/bits"
)

// DefaultMaxMessage is the message size limit of a Decoder made with maxMessage <= 0.
const DefaultMaxMessage = 4 << 20

// Frame is one step of a Decoder: a message, a batch element, the end of a batch, or a
// rejected message.
type Frame struct {
	// Data is the message (a complete JSON value, no surrounding whitespace, ready for
	// Scan), valid until the next call to Next. For an Err frame it holds what is
	// available of the rejected message, possibly truncated, possibly nil.
	Data []byte
	// InBatch is set for the elements of a top-level array and for the frames that
	// end one.
	InBatch bool
	// BatchEnd marks the end of a batch: its closing ']' (no Data, no Err) or, with Err
	// set, a batch broken or cut short; the elements before it were yielded already.
	BatchEnd bool
	// Err is set (to an *Error) when the message or batch was rejected: a parse error
	// (what and where, Offset relative to the start of the message), an empty batch
	// (invalid request, InBatch false: answer it with a single error), or a message
	// longer than the limit (invalid request that also matches ErrTooLarge; Data holds
	// its first maxMessage bytes). The Decoder goes on with the next message.
	Err error
}

// Decoder states.
const (
	stTop       uint8 = iota // between top-level messages
	stBatchOpen              // after a batch's '[': an element or ']'
	stBatchElem              // after ',' in a batch: an element
	stBatchSep               // after a batch element: ',' or ']'
	stMsg                    // inside a container or string message
	stScalar                 // inside a bare scalar (number, literal)
	stResync                 // discarding input through the next newline
)

const minRead = 4096

// Decoder splits a byte stream into JSON-RPC messages: newline-delimited JSON (stdio),
// concatenated SSE data payloads, a request body read in chunks; messages may be
// separated by any JSON whitespace. It yields each message as soon as its last byte has
// arrived, and each element of a batch (a top-level array) as soon as that element is
// complete, before the closing bracket; so memory is bounded by the largest message
// (or batch element), not by the largest batch.
//
// The Decoder frames; it does not validate: it tracks strings, escapes and brackets,
// and Scan checks each frame. Input that cannot start or continue a message (a stray
// byte, a mismatched bracket, a raw control character in a string) is a parse error
// frame, after which the Decoder discards input through the next newline and goes on
// there. A message longer than maxMessage bytes is reported as soon as its limit is
// passed, then skipped to its end (by its brackets) without being buffered.
//
// Results do not depend on how the input is split across reads. A Decoder is not safe
// for concurrent use.
type Decoder struct {
	r      io.Reader
	max    int
	buf    []byte // buffered input; buf[off:] is not consumed yet
	off    int    // start of the current message (or of the unconsumed bytes)
	pos    int    // next byte to look at
	base   int64  // stream offset of buf[0]
	start  int64  // stream offset of the current message
	bstart int64  // stream offset of the current batch's '['
	rerr   error  // error from the reader, handled once the buffer is drained
	fatal  error  // sticky error returned by Next

	st       uint8
	started  bool // past the optional byte order mark at the start of the stream
	batch    bool // inside a top-level array
	inStr    bool // inside a string
	esc      bool // the previous byte was a backslash in a string
	skipping bool // discarding an oversized message that was already reported
	depth    int  // open containers in the current message
	stack    [(MaxDepth + 63) / 64]uint64
}

// NewDecoder returns a Decoder reading from r that rejects messages longer than
// maxMessage bytes (DefaultMaxMessage if maxMessage <= 0).
func NewDecoder(r io.Reader, maxMessage int) *Decoder {
	if maxMessage <= 0 {
		maxMessage = DefaultMaxMessage
	}
	// Keep the index arithmetic (limit + 1 + a read) far from overflow.
	maxMessage = min(maxMessage, math.MaxInt/4)
	return &Decoder{r: r, max: maxMessage}
}

// Reset makes d read a new stream from r, as if it were new, but keeps its buffer, so
// that a pooled Decoder costs no allocation per stream. Frames from before the Reset
// become invalid.
func (d *Decoder) Reset(r io.Reader) {
	buf, limit := d.buf[:0], d.max
	*d = Decoder{r: r, max: limit, buf: buf}
}

// Next returns the next frame. Its error is only for the end of the stream (io.EOF
// after the last frame) or a reader error; both are sticky. A rejected message is not
// an error of Next: it is a Frame with Err set, and the stream goes on.
func (d *Decoder) Next() (Frame, error) {
	if d.fatal != nil {
		return Frame{}, d.fatal
	}
	// Bounded: every round returns or reads, and fill gives up on a reader that
	// keeps returning nothing.
	for range 1 << 30 {
		if f, ok := d.step(); ok {
			return f, nil
		}
		if d.rerr != nil {
			if d.rerr == io.EOF {
				if f, ok := d.atEOF(); ok {
					return f, nil
				}
			}
			d.fatal = d.rerr
			return Frame{}, d.fatal
		}
		d.fill()
	}
	d.fatal = io.ErrNoProgress
	return Frame{}, d.fatal
}

// fill drops the consumed bytes and reads more.
func (d *Decoder) fill() {
	if d.off > 0 {
		n := copy(d.buf, d.buf[d.off:])
		d.base += int64(d.off)
		d.pos -= d.off
		d.off = 0
		d.buf = d.buf[:n]
	}
	if len(d.buf) == cap(d.buf) {
		// Never more than a message, the byte that tells it is too long, and a
		// read's worth: see step.
		c := min(max(2*cap(d.buf), minRead), d.max+1+minRead)
		nb := make([]byte, len(d.buf), c)
		copy(nb, d.buf)
		d.buf = nb
	}
	// Like bufio: a reader that keeps returning nothing is an error, not a spin.
	for range 100 {
		n, err := d.r.Read(d.buf[len(d.buf):cap(d.buf)])
		d.buf = d.buf[:len(d.buf)+n]
		if err != nil {
			d.rerr = err
			return
		}
		if n > 0 {
			return
		}
	}
	d.rerr = io.ErrNoProgress
}

// delim[c] is true for the bytes that end a bare scalar.
var delim = [256]bool{' ': true, '\t': true, '\n': true, '\r': true, ',': true, ']': true, '}': true, '[': true, '{': true, '"': true, ':': true}

// framePlain[c] is true for bytes the framer passes over inside a string.
var framePlain = func() (t [256]bool) {
	for c := 0x20; c < 0x100; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// consume marks buf[:i] consumed.
func (d *Decoder) consume(i int) {
	d.pos = i
	d.off = i
}

// done ends the current message at i and returns its frame (ok false when it was an
// oversized one being skipped).
func (d *Decoder) done(i int) (Frame, bool) {
	f := Frame{Data: d.buf[d.off:i], InBatch: d.batch}
	skipped := d.skipping
	d.skipping = false
	d.consume(i)
	if d.batch {
		d.st = stBatchSep
	} else {
		d.st = stTop
	}
	return f, !skipped
}

// frameError rejects the current message (or batch) because of the byte at i, and
// resynchronises after the next newline.
func (d *Decoder) frameError(reason string, i int) Frame {
	f := Frame{InBatch: d.batch, BatchEnd: d.batch}
	// Offsets count from the start of the message, or of the batch for an error
	// between its elements.
	ref := d.start
	switch d.st {
	case stMsg, stScalar:
		if !d.skipping {
			f.Data = d.buf[d.off:min(i+1, len(d.buf))]
		}
	case stTop:
		f.Data = d.buf[i : i+1]
	default:
		ref = d.bstart
	}
	f.Err = parseError(reason, int(d.base+int64(i)-ref))
	d.reset()
	if d.buf[i] == '\n' {
		d.st = stTop
	} else {
		d.st = stResync
	}
	d.consume(i + 1)
	return f
}

// tooLarge rejects the current message at its limit and starts skipping it.
func (d *Decoder) tooLarge() Frame {
	f := Frame{
		Data:    d.buf[d.off : d.off+d.max],
		InBatch: d.batch,
		Err:     &Error{Code: CodeInvalidRequest, Reason: reasonTooLarge, Offset: d.max, also: ErrTooLarge},
	}
	d.skipping = true
	d.consume(d.off + d.max)
	return f
}

func (d *Decoder) reset() {
	d.batch, d.inStr, d.esc, d.skipping = false, false, false, false
	d.depth = 0
}

// step runs the state machine over the buffered bytes. It returns a frame as soon as
// one is ready, or ok false when it needs more input.
func (d *Decoder) step() (Frame, bool) {
	b := d.buf
	if !d.started {
		// RFC 8259 lets a parser ignore a UTF-8 byte order mark; editors and some
		// Windows tools put one at the start of a stream. Wait for more bytes only
		// while what arrived could still be one.
		const bom = "\xEF\xBB\xBF"
		n := min(len(b), 3)
		if string(b[:n]) == bom[:n] {
			if n < 3 {
				if d.rerr == nil {
					return Frame{}, false
				}
			} else {
				d.consume(3)
			}
		}
		d.started = true
	}
	for d.pos < len(b) {
		switch d.st {
		case stResync:
			i := d.pos
			for i < len(b) && b[i] != '\n' {
				i++
			}
			if i == len(b) {
				d.consume(i)
				return Frame{}, false
			}
			d.consume(i + 1)
			d.st = stTop

		case stTop, stBatchOpen, stBatchElem, stBatchSep:
			i := ws(b, d.pos)
			d.consume(i)
			if i >= len(b) {
				return Frame{}, false
			}
			c := b[i]
			switch d.st {
			case stBatchSep:
				switch c {
				case ',':
					d.consume(i + 1)
					d.st = stBatchElem
				case ']':
					d.consume(i + 1)
					d.batch = false
					d.st = stTop
					return Frame{InBatch: true, BatchEnd: true}, true
				default:
					return d.frameError(reasonExpectComma, i), true
				}
				continue
			case stBatchOpen:
				if c == ']' {
					d.consume(i + 1)
					d.batch = false
					d.st = stTop
					return Frame{Err: invalidError(reasonEmptyBatch, 0)}, true
				}
			case stBatchElem:
				if c == ']' {
					return d.frameError(reasonUnexpected, i), true
				}
			case stTop:
				if c == '[' {
					d.bstart = d.base + int64(i)
					d.consume(i + 1)
					d.batch = true
					d.st = stBatchOpen
					continue
				}
			}
			d.start = d.base + int64(i)
			switch {
			case c == '{' || c == '[':
				d.depth = 1
				d.setTop(c == '{')
				d.st = stMsg
			case c == '"':
				d.depth = 0
				d.inStr = true
				d.st = stMsg
			case c == '-' || c-'0' < 10 || c == 't' || c == 'f' || c == 'n':
				d.st = stScalar
			default:
				return d.frameError(reasonUnexpected, i), true
			}
			d.pos = i + 1

		case stScalar:
			lim := len(b)
			if !d.skipping {
				lim = min(lim, d.off+d.max+1)
			}
			i := d.pos
			for i < lim && !delim[b[i]] {
				i++
			}
			if i < lim {
				if f, ok := d.done(i); ok {
					return f, true
				}
				continue
			}
			d.pos = i
			if i == d.off+d.max+1 && !d.skipping {
				return d.tooLarge(), true
			}
			if d.skipping {
				d.consume(i)
			}
			return Frame{}, false

		case stMsg:
			lim := len(b)
			if !d.skipping {
				lim = min(lim, d.off+d.max)
			}
			i, end, reason := d.frame(b, d.pos, lim)
			if reason != "" {
				return d.frameError(reason, i), true
			}
			if end {
				if f, ok := d.done(i); ok {
					return f, true
				}
				continue
			}
			d.pos = i
			if d.skipping {
				d.consume(i)
				return Frame{}, false
			}
			if i == d.off+d.max && i < len(b) {
				return d.tooLarge(), true
			}
			return Frame{}, false
		}
	}
	return Frame{}, false
}

// setTop records whether the container just opened at depth d.depth is an object.
func (d *Decoder) setTop(obj bool) {
	k := d.depth - 1
	if k >= MaxDepth {
		return // deeper than Scan accepts: it will reject the message, no need to check
	}
	if obj {
		d.stack[k>>6] |= 1 << (k & 63)
	} else {
		d.stack[k>>6] &^= 1 << (k & 63)
	}
}

// frameStruct[c] is true for the bytes the framer must look at outside strings.
var frameStruct = [256]bool{'"': true, '{': true, '[': true, '}': true, ']': true}

// frame advances through b[i:lim] inside a message. It returns the index it stopped
// at, whether the message ended there (i is then just past it), or a reason to reject
// the message because of b[i]. The state lives in locals while it runs.
func (d *Decoder) frame(b []byte, i, lim int) (int, bool, string) {
	depth, inStr, esc := d.depth, d.inStr, d.esc
	end, reason := false, ""
loop:
	for i < lim {
		if esc {
			esc = false
			if b[i] < 0x20 {
				reason = reasonControl
				break
			}
			i++
			continue
		}
		if inStr {
			for i+8 <= lim {
				x := binary.LittleEndian.Uint64(b[i:])
				q := x ^ (lsb * '"')
				e := x ^ (lsb * '\\')
				if m := ((x - lsb*0x20) | (q - lsb) | (e - lsb)) &^ x & msb; m != 0 {
					i += bits.TrailingZeros64(m) >> 3
					break
				}
				i += 8
			}
			for i < lim && framePlain[b[i]] {
				i++
			}
			if i >= lim {
				break
			}
			switch c := b[i]; {
			case c == '"':
				inStr = false
				i++
				if depth == 0 {
					end = true
					break loop
				}
			case c == '\\':
				esc = true
				i++
			default:
				reason = reasonControl
				break loop
			}
			continue
		}
		for i < lim && !frameStruct[b[i]] {
			i++
		}
		if i >= lim {
			break
		}
		switch c := b[i]; c {
		case '"':
			inStr = true
		case '{', '[':
			depth++
			if k := depth - 1; k < MaxDepth {
				if c == '{' {
					d.stack[k>>6] |= 1 << (k & 63)
				} else {
					d.stack[k>>6] &^= 1 << (k & 63)
				}
			}
		default: // '}' or ']'
			if k := depth - 1; k < MaxDepth {
				if obj := d.stack[k>>6]&(1<<(k&63)) != 0; obj != (c == '}') {
					reason = reasonExpectComma
					break loop
				}
			}
			depth--
			if depth == 0 {
				i++
				end = true
				break loop
			}
		}
		i++
	}
	d.depth, d.inStr, d.esc = depth, inStr, esc
	return i, end, reason
}

// atEOF finishes the stream once the reader is exhausted: a pending bare scalar is
// complete, anything else open is cut short. ok false means the stream ended cleanly.
func (d *Decoder) atEOF() (Frame, bool) {
	b := d.buf
	switch d.st {
	case stScalar:
		if f, ok := d.done(len(b)); ok {
			return f, true
		}
		return d.atEOF() // a skipped oversized scalar: maybe the batch is open
	case stMsg:
		if d.skipping && !d.batch {
			d.reset()
			d.st = stTop
			return Frame{}, false
		}
		f := Frame{InBatch: d.batch, BatchEnd: d.batch}
		if !d.skipping {
			f.Data = b[d.off:]
		}
		f.Err = parseError(reasonEOF, int(d.base+int64(len(b))-d.start))
		d.reset()
		d.st = stTop
		d.consume(len(b))
		return f, true
	case stBatchOpen, stBatchElem, stBatchSep:
		d.reset()
		d.st = stTop
		d.consume(len(b))
		return Frame{InBatch: true, BatchEnd: true, Err: parseError(reasonEOF, int(d.base+int64(len(b))-d.bstart))}, true
	}
	return Frame{}, false
}
