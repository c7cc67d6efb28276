package codec

import (
	"encoding/binary"
	"math/bits"
)

// IsBatch reports whether b holds a JSON-RPC batch, that is whether its first
// non-whitespace byte is '['. It looks at nothing else: SplitBatch validates.
func IsBatch(b []byte) bool {
	i := ws(b, 0)
	return i < len(b) && b[i] == '['
}

// SplitBatch splits the batch b (a JSON array) and appends a view of each element to
// elems, in order, without surrounding whitespace; each view is ready for Scan.
//
// SplitBatch checks the array itself: its brackets, commas and whitespace, and, to find
// where each element ends, the element's strings and brackets. A break there is one
// parse error for the whole batch, as JSON-RPC 2.0 asks for a batch that is not valid
// JSON. What lies inside an element (numbers, literals, escapes, UTF-8, depth) is left
// to Scan, which validates each element fully: a bad element gets its own error while
// its siblings go through, which is what the streaming Decoder can do too, so both give
// the same answers for the same bytes. An element that Scan accepts is valid JSON, so a
// batch whose elements all scan without a parse error is a valid JSON text.
//
// An empty array, or a valid JSON value that is not an array, is an invalid request.
// On error, elems is returned with its original length. With enough capacity in elems,
// SplitBatch does not allocate.
func SplitBatch(b []byte, elems [][]byte) ([][]byte, error) {
	n0 := len(elems)
	s := scanner{b: b}
	i := ws(b, 0)
	if i >= len(b) || b[i] != '[' {
		s.notTop(reasonNotArray)
		return elems, s.err()
	}
	open := i
	i = ws(b, i+1)
	if i >= len(b) {
		return elems, parseError(reasonEOF, i)
	}
	if b[i] == ']' {
		if j := ws(b, i+1); j != len(b) {
			return elems, parseError(reasonTrailing, j)
		}
		return elems, invalidError(reasonEmptyBatch, open)
	}
	for {
		vs := i
		if i = s.element(i); i < 0 {
			return elems[:n0], s.err()
		}
		elems = append(elems, b[vs:i])
		i = ws(b, i)
		if i >= len(b) {
			return elems[:n0], parseError(reasonEOF, i)
		}
		c := b[i]
		if c == ']' {
			break
		}
		if c != ',' {
			return elems[:n0], parseError(reasonExpectComma, i)
		}
		i = ws(b, i+1)
		if i >= len(b) {
			return elems[:n0], parseError(reasonEOF, i)
		}
	}
	if i = ws(b, i+1); i != len(b) {
		return elems[:n0], parseError(reasonTrailing, i)
	}
	return elems, nil
}

// quoteRun returns the index of the first '"', '\\' or control character at or after j,
// eight bytes at a time, or the last position with eight bytes left if there is none.
func quoteRun(b []byte, j int) int {
	for j+8 <= len(b) {
		x := binary.LittleEndian.Uint64(b[j:])
		q := x ^ (lsb * '"')
		e := x ^ (lsb * '\\')
		// Non-ASCII bytes are masked out by &^ x; of the flagged bytes only the
		// lowest is exact (borrows flag bytes above it), and it is the one used.
		if m := ((x - lsb*0x20) | (q - lsb) | (e - lsb)) &^ x & msb; m != 0 {
			return j + bits.TrailingZeros64(m)>>3
		}
		j += 8
	}
	return j
}

// skipQuoted returns the index after the string whose opening quote is at b[i], or -1.
// It goes by quotes and backslashes and rejects raw control characters, exactly as the
// Decoder frames strings; Scan validates the rest (escapes, UTF-8).
func (s *scanner) skipQuoted(i int) int {
	b := s.b
	i++
	for {
		i = quoteRun(b, i)
		for i < len(b) && framePlain[b[i]] {
			i++
		}
		if i >= len(b) {
			return s.fail(reasonUnterminated, i)
		}
		switch c := b[i]; {
		case c == '"':
			return i + 1
		case c == '\\':
			// A backslash and the byte it escapes, which must not be a control
			// character either.
			if i+1 < len(b) && b[i+1] < 0x20 {
				return s.fail(reasonControl, i+1)
			}
			i += 2
		default:
			return s.fail(reasonControl, i)
		}
	}
}

// element finds the end of the batch element starting at b[i] by its strings and
// brackets (see SplitBatch) and returns the index after it, or -1.
func (s *scanner) element(i int) int {
	b := s.b
	switch c := b[i]; c {
	case '"':
		return s.skipQuoted(i)
	case '{', '[':
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9', 't', 'f', 'n':
		// A scalar runs to the next delimiter; Scan judges it.
		for i < len(b) && !delim[b[i]] {
			i++
		}
		return i
	default:
		return s.fail(reasonUnexpected, i)
	}
	var stack [(MaxDepth + 63) / 64]uint64
	depth := 0
	for i < len(b) {
		switch c := b[i]; c {
		case '"':
			if j := quoteRun(b, i+1); j < len(b) && b[j] == '"' {
				i = j + 1 // the common string, settled without a call
			} else if i = s.skipQuoted(i); i < 0 {
				return -1
			}
			for i < len(b) && !frameStruct[b[i]] {
				i++
			}
			continue
		case '{', '[':
			if depth < MaxDepth {
				if c == '{' {
					stack[depth>>6] |= 1 << (depth & 63)
				} else {
					stack[depth>>6] &^= 1 << (depth & 63)
				}
			}
			depth++
		case '}', ']':
			depth--
			if depth < MaxDepth {
				if obj := stack[depth>>6]&(1<<(depth&63)) != 0; obj != (c == '}') {
					return s.fail(reasonExpectComma, i)
				}
			}
			if depth == 0 {
				return i + 1
			}
		}
		i++
		for i < len(b) && !frameStruct[b[i]] {
			i++
		}
	}
	return s.fail(reasonEOF, i)
}
