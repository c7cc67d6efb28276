package client

import (
	"errors"
	"io"
)

// chunkedBody decodes an HTTP/1.1 chunked body read straight from its connection, in
// place in the caller's buffer: a held stream's only buffer is then its SSE reader's,
// where net/http's chunked reader needs a bufio.Reader under it (2 KiB or more per
// held stream). Chunk extensions are skipped, and the body ends (io.EOF) at the last
// chunk: trailers are not read, as a stream's connection is closed when its body ends.
//
// It is read by one goroutine at a time.
type chunkedBody struct {
	r       io.Reader
	pending []byte // bytes read past the response's headers, decoded before r's
	left    uint64 // data bytes left in the chunk, or the size being parsed
	digits  uint8  // hex digits of the size so far
	state   chunkState
}

type chunkState uint8

const (
	chunkSize   chunkState = iota // the size's hex digits
	chunkExt                      // after the size, up to the line's end
	chunkSizeLF                   // the size line's \n
	chunkData                     // the chunk's data
	chunkDataCR                   // the \r\n after the data
	chunkDataLF                   //
	chunkEnd                      // the last chunk was read
)

var errChunked = errors.New("malformed chunked encoding")

// Read reads raw bytes into p and keeps the data among them; it returns once it has
// some, or an error.
func (c *chunkedBody) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	for {
		if c.state == chunkEnd {
			return 0, io.EOF
		}
		var n int
		var err error
		if len(c.pending) > 0 {
			n = copy(p, c.pending)
			if c.pending = c.pending[n:]; len(c.pending) == 0 {
				c.pending = nil
			}
		} else {
			n, err = c.r.Read(p)
		}
		w, derr := c.decode(p[:n])
		if derr != nil {
			return w, derr
		}
		if err == io.EOF && c.state != chunkEnd {
			err = io.ErrUnexpectedEOF // the connection ended within the body
		}
		if w > 0 || err != nil {
			return w, err
		}
	}
}

// decode strips the chunk framing from b in place and returns the length of the data
// left at its start.
func (c *chunkedBody) decode(b []byte) (int, error) {
	w := 0
	for i := 0; i < len(b); {
		switch c.state {
		case chunkData:
			k := len(b) - i
			if uint64(k) > c.left {
				k = int(c.left)
			}
			w += copy(b[w:], b[i:i+k])
			i += k
			if c.left -= uint64(k); c.left == 0 {
				c.state = chunkDataCR
			}
			continue
		case chunkEnd:
			return w, nil
		}
		if err := c.frame(b[i]); err != nil {
			return w, err
		}
		i++
	}
	return w, nil
}

// frame takes one byte of framing: of a size line or of the line end after data.
func (c *chunkedBody) frame(ch byte) error {
	switch c.state {
	case chunkSize:
		switch v := hexValue(ch); {
		case v >= 0:
			if c.digits++; c.digits > 15 {
				return errChunked // a chunk of a petabyte or more
			}
			c.left = c.left<<4 | uint64(v)
		case c.digits == 0:
			return errChunked
		case ch == '\r':
			c.state = chunkSizeLF
		case ch == '\n':
			c.sized()
		case ch == ';' || ch == ' ' || ch == '\t':
			c.state = chunkExt
		default:
			return errChunked
		}
	case chunkExt:
		if ch == '\n' {
			c.sized()
		}
	case chunkSizeLF:
		if ch != '\n' {
			return errChunked
		}
		c.sized()
	case chunkDataCR:
		switch ch {
		case '\r':
			c.state = chunkDataLF
		case '\n':
			c.state = chunkSize
		default:
			return errChunked
		}
	case chunkDataLF:
		if ch != '\n' {
			return errChunked
		}
		c.state = chunkSize
	}
	return nil
}

// sized ends a size line: the chunk's data follows, or the body ends.
func (c *chunkedBody) sized() {
	c.digits = 0
	if c.left == 0 {
		c.state = chunkEnd
		return
	}
	c.state = chunkData
}

// hexValue is the value of the hex digit ch, or -1.
func hexValue(ch byte) int {
	switch {
	case ch >= '0' && ch <= '9':
		return int(ch - '0')
	case ch >= 'a' && ch <= 'f':
		return int(ch-'a') + 10
	case ch >= 'A' && ch <= 'F':
		return int(ch-'A') + 10
	}
	return -1
}
