package fanout

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// The client side of a GET stream is written by hand rather than with net/http: ten
// thousand of them share two cores with the routers being measured, so each one must be
// a single goroutine blocked in read with a few KiB of buffers, and the time of receipt
// must be taken the moment an event's last line is read, not after a library's own
// buffering and goroutines. The pieces are an HTTP/1.1 response-head reader, a chunked
// transfer-coding decoder and an SSE event reader, each small enough to fuzz.

// Errors of the stream reader.
var (
	// ErrStatus: the GET was not answered with 200.
	ErrStatus = errors.New("fanout: stream not opened (status is not 200)")
	// ErrMalformed: the response head, a chunk header or an SSE line is broken.
	ErrMalformed = errors.New("fanout: malformed stream")
	// ErrTooLong: a header line, chunk header or SSE event is longer than the reader's
	// limit.
	ErrTooLong = errors.New("fanout: line or event too long")
)

// Limits of the stream reader, far above what a router sends, so that a broken peer
// cannot make a reader grow without bound.
const (
	maxHeadLines  = 100
	maxHeadLine   = 8 << 10
	maxEventBytes = 1 << 20
)

// readHead reads an HTTP/1.1 response's status line and headers from br. It accepts
// only status 200 and reports whether the body uses the chunked transfer coding (a
// streamed response of unknown length: fasthttp's, when the router streams SSE).
func readHead(br *bufio.Reader) (chunked bool, err error) {
	for i := 0; i < maxHeadLines; i++ {
		line, err := readLine(br, maxHeadLine)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return false, io.ErrUnexpectedEOF
			}
			return false, err
		}
		if i == 0 {
			// "HTTP/1.1 200 OK": the version, one space, three digits.
			if !bytes.HasPrefix(line, []byte("HTTP/1.")) || len(line) < 12 || line[8] != ' ' {
				return false, fmt.Errorf("%w: status line %q", ErrMalformed, clip(line))
			}
			if string(line[9:12]) != "200" {
				return false, fmt.Errorf("%w: %q", ErrStatus, clip(line))
			}
			continue
		}
		if len(line) == 0 {
			return chunked, nil
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			return false, fmt.Errorf("%w: header line %q", ErrMalformed, clip(line))
		}
		if bytes.EqualFold(bytes.TrimSpace(name), []byte("Transfer-Encoding")) {
			chunked = bytes.EqualFold(lastToken(value), []byte("chunked"))
		}
	}
	return false, fmt.Errorf("%w: more than %d header lines", ErrMalformed, maxHeadLines)
}

// lastToken is the last comma-separated element of a header value: the transfer coding
// applied last, which is the one that frames the body.
func lastToken(v []byte) []byte {
	if i := bytes.LastIndexByte(v, ','); i >= 0 {
		v = v[i+1:]
	}
	return bytes.TrimSpace(v)
}

// readLine returns one line without its "\n" or "\r\n", at most limit bytes long. The
// slice is valid until the next read from br. A line longer than br's buffer but within
// limit is assembled in a new slice (never for the short lines of a router's stream).
// The outcome does not depend on br's buffer size: a line longer than limit is
// ErrTooLong however it ends, and a last line without its end is io.ErrUnexpectedEOF.
func readLine(br *bufio.Reader, limit int) ([]byte, error) {
	line, err := br.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		long := append([]byte(nil), line...)
		// limit+2 bytes without a "\n" is too long whatever follows.
		for err == bufio.ErrBufferFull && len(long) < limit+2 {
			line, err = br.ReadSlice('\n')
			long = append(long, line...)
		}
		if err == bufio.ErrBufferFull {
			return nil, ErrTooLong
		}
		line = long
	}
	if err == nil {
		line = line[:len(line)-1]
		if n := len(line); n > 0 && line[n-1] == '\r' {
			line = line[:n-1]
		}
	}
	if len(line) > limit {
		return nil, ErrTooLong
	}
	if err != nil {
		if err == io.EOF && len(line) > 0 {
			return nil, io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return line, nil
}

// chunkedReader decodes a body in the chunked transfer coding (RFC 9112, section 7.1):
// "<hex size>[;extensions]\r\n<size bytes>\r\n" repeated, ended by a zero-size chunk
// and optional trailer lines. Read returns io.EOF after the last chunk.
type chunkedReader struct {
	br   *bufio.Reader
	left int64 // bytes of the current chunk not read yet
	err  error // sticky
}

// maxChunk bounds one chunk's declared size (sizes are 64-bit hex; a peer could send
// any), far above what an SSE stream writes at once.
const maxChunk = 1 << 30

func (c *chunkedReader) Read(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	if c.left == 0 {
		if c.err = c.nextChunk(); c.err != nil {
			return 0, c.err
		}
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.br.Read(p)
	c.left -= int64(n)
	if c.left == 0 && err == nil {
		// The chunk's data ends with CRLF.
		switch _, lerr := readLine(c.br, 0); {
		case lerr == ErrTooLong:
			err = fmt.Errorf("%w: chunk data longer than its size", ErrMalformed)
		case lerr != nil:
			err = lerr
		}
	}
	if err == io.EOF {
		err = io.ErrUnexpectedEOF // the body ends only with its last chunk
	}
	c.err = err
	return n, err
}

// nextChunk reads a chunk header; at the last chunk it reads the trailer and returns
// io.EOF.
func (c *chunkedReader) nextChunk() error {
	line, err := readLine(c.br, 256)
	if err != nil {
		if err == io.EOF {
			return io.ErrUnexpectedEOF
		}
		if err == ErrTooLong {
			return fmt.Errorf("%w: chunk header", ErrMalformed)
		}
		return err
	}
	if i := bytes.IndexByte(line, ';'); i >= 0 {
		line = line[:i]
	}
	line = bytes.TrimRight(line, " \t")
	if len(line) == 0 {
		return fmt.Errorf("%w: empty chunk size", ErrMalformed)
	}
	var size int64
	for _, ch := range line {
		var d byte
		switch {
		case ch >= '0' && ch <= '9':
			d = ch - '0'
		case ch >= 'a' && ch <= 'f':
			d = ch - 'a' + 10
		case ch >= 'A' && ch <= 'F':
			d = ch - 'A' + 10
		default:
			return fmt.Errorf("%w: chunk size %q", ErrMalformed, clip(line))
		}
		size = size<<4 | int64(d)
		if size > maxChunk {
			return fmt.Errorf("%w: chunk of more than %d bytes", ErrTooLong, maxChunk)
		}
	}
	if size > 0 {
		c.left = size
		return nil
	}
	// Last chunk: trailer fields up to an empty line.
	for i := 0; i < maxHeadLines; i++ {
		line, err := readLine(c.br, maxHeadLine)
		if err != nil {
			if err == io.EOF {
				return io.ErrUnexpectedEOF
			}
			return err
		}
		if len(line) == 0 {
			return io.EOF
		}
	}
	return fmt.Errorf("%w: more than %d trailer lines", ErrMalformed, maxHeadLines)
}

// eventReader reads SSE events (the WHATWG event-stream format) and returns the data of
// each one that has data. Lines end with "\n" or "\r\n" (a lone "\r" is not treated as a
// line end: no MCP server writes one). Comments, "id", "event" and "retry" fields are
// skipped; they do not matter to the benchmark.
type eventReader struct {
	br   *bufio.Reader
	data []byte // data of the event being read
	has  bool   // some data line was seen (an event whose data is empty is not dispatched)
}

// Next returns the data of the next event with data (its data lines joined by "\n").
// The slice is valid until the next call. At the end of the stream it returns io.EOF,
// or io.ErrUnexpectedEOF when the stream ends within a line or within its framing; an
// unfinished last event is dropped, as the format says.
func (e *eventReader) Next() ([]byte, error) {
	e.data, e.has = e.data[:0], false
	for {
		line, err := readLine(e.br, maxEventBytes)
		if err != nil {
			return nil, err
		}
		if len(line) == 0 {
			if e.has && len(e.data) > 0 {
				return e.data, nil
			}
			e.data, e.has = e.data[:0], false
			continue
		}
		value, ok := bytes.CutPrefix(line, []byte("data"))
		if !ok {
			continue // comment or another field
		}
		if len(value) > 0 {
			if value[0] != ':' {
				continue // a field named "data..." but not "data"
			}
			value = value[1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		}
		if e.has {
			e.data = append(e.data, '\n')
		}
		if len(e.data)+len(value) > maxEventBytes {
			return nil, ErrTooLong
		}
		e.data = append(e.data, value...)
		e.has = true
	}
}

// clip shortens a line quoted in an error.
func clip(b []byte) []byte {
	if len(b) > 64 {
		return b[:64]
	}
	return b
}
