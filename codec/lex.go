package codec

import (
	"encoding/binary"
	"math/bits"
)

// MaxDepth is the deepest nesting of objects and arrays a message may have (the message
// object itself counts as one level). Deeper input is a parse error: it bounds the work
// and the state per message, and no MCP message comes near it.
const MaxDepth = 128

// SWAR constants: one byte repeated over a 64-bit word.
const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

// strSpecial returns a mask with the top bit set in every byte of x (little-endian: byte
// 0 is the lowest) that needs attention inside a JSON string: '"', '\\', a control
// character (< 0x20) or a non-ASCII byte (>= 0x80). Subtraction borrows may also flag
// bytes above a flagged one, so only the lowest flagged byte is exact; that is the only
// one we use.
func strSpecial(x uint64) uint64 {
	q := x ^ (lsb * '"')
	e := x ^ (lsb * '\\')
	// Bytes >= 0x80 are all flagged by the final | x, which makes masking out what
	// the subtractions flagged in them pointless: (A &^ x) | x == A | x.
	return ((x - lsb*0x20) | (q - lsb) | (e - lsb) | x) & msb
}

// plain[c] is true for bytes that need no attention inside a JSON string.
var plain = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// escapable[c] is true for the bytes that may follow a backslash in a JSON string
// (other than 'u', which needs four hex digits).
var escapable = [256]bool{'"': true, '\\': true, '/': true, 'b': true, 'f': true, 'n': true, 'r': true, 't': true}

// hexVal maps a hex digit to its value and anything else to 0xff.
var hexVal = func() (t [256]byte) {
	for i := range t {
		t[i] = 0xff
	}
	for c := '0'; c <= '9'; c++ {
		t[c] = byte(c - '0')
	}
	for c := 'a'; c <= 'f'; c++ {
		t[c] = byte(c - 'a' + 10)
		t[c-'a'+'A'] = byte(c - 'a' + 10)
	}
	return t
}()

// utf8Len returns the length of the valid UTF-8 sequence starting at b[i] (b[i] >= 0x80),
// or 0 if it is invalid (overlong forms, surrogates, beyond U+10FFFF, truncated).
func utf8Len(b []byte, i int) int { return utf8LenOf(b, i) }

// ws returns the index of the first non-whitespace byte at or after i (or len(b)).
func ws(b []byte, i int) int {
	for i < len(b) {
		c := b[i]
		if c > ' ' || (c != ' ' && c != '\n' && c != '\r' && c != '\t') {
			return i
		}
		i++
	}
	return i
}

// scanner validates JSON and records the first parse error (which always wins) and
// the first envelope error (reported only when the input is valid JSON).
//
// Its methods return the index just past what they scanned, or -1 after recording a
// parse error; every caller checks for -1 before going on.
type scanner struct {
	b []byte

	perr    bool // a parse error was recorded
	preason string
	poff    int

	ereason string // first invalid-request reason, "" if none
	eoff    int
}

// fail records a parse error (the first one only) and returns -1.
func (s *scanner) fail(reason string, off int) int {
	if !s.perr {
		s.perr = true
		s.preason = reason
		s.poff = off
	}
	return -1
}

// invalid records an invalid-request error; the first one wins.
func (s *scanner) invalid(reason string, off int) {
	if s.ereason == "" {
		s.ereason = reason
		s.eoff = off
	}
}

// err returns the recorded error, parse errors first, nil if none.
func (s *scanner) err() error {
	if s.perr {
		return parseError(s.preason, s.poff)
	}
	if s.ereason != "" {
		return invalidError(s.ereason, s.eoff)
	}
	return nil
}

// strRun returns the index of the first byte at or after j that needs attention inside
// a string ('"', '\\', a control or non-ASCII byte), or len(b): eight bytes at a time,
// then the tail one by one. It is small enough for the compiler to inline at the hot
// call sites, where the common case (the byte found is the closing quote) costs no
// call at all.
func strRun(b []byte, j int) int {
	for j+8 <= len(b) {
		if m := strSpecial(binary.LittleEndian.Uint64(b[j:])); m != 0 {
			return j + bits.TrailingZeros64(m)>>3
		}
		j += 8
	}
	for j < len(b) && plain[b[j]] {
		j++
	}
	return j
}

// str validates the string whose opening quote is at b[i] and returns the index after
// its closing quote, and whether it contains a backslash escape.
func (s *scanner) str(i int) (int, bool) {
	b := s.b
	j := strRun(b, i+1)
	if j < len(b) && b[j] == '"' {
		return j + 1, false
	}
	return s.strSlow(j, false)
}

// notTop records why the input does not hold an object or array of the kind the
// caller wants (its first non-space byte is not the opening bracket): a parse error
// for empty input or invalid JSON, else an invalid request with reason (valid JSON of
// another type).
func (s *scanner) notTop(reason string) {
	b := s.b
	i := ws(b, 0)
	if i >= len(b) {
		s.fail(reasonEmpty, i)
		return
	}
	start := i
	if i = s.value(i, 0); i < 0 {
		return
	}
	if i = ws(b, i); i != len(b) {
		s.fail(reasonTrailing, i)
		return
	}
	s.invalid(reason, start)
}

// open enters the object or array whose opening bracket is at b[i] and returns the
// index of its first member or element (whitespace skipped, done false), or, when it is
// empty, the index just past its closing bracket close (done true). With after and
// member it walks an object or array without repeating the punctuation checks:
//
//	i, done := s.open(i, '}')
//	for !done {
//		key, esc, v := s.member(i)
//		... scan the value at v into i ...
//		i, done = s.after(i, '}')
//	}
//
// i is -1 after a parse error, and done is then true.
func (s *scanner) open(i int, close byte) (int, bool) {
	b := s.b
	i = ws(b, i+1)
	if i >= len(b) {
		return s.fail(reasonEOF, i), true
	}
	if b[i] == close {
		return i + 1, true
	}
	return i, false
}

// member scans an object key at b[i] and the colon after it, and returns the key's raw
// contents, whether it has escapes, and the index of the value (whitespace skipped).
func (s *scanner) member(i int) (key []byte, esc bool, v int) {
	b := s.b
	if b[i] != '"' {
		return nil, false, s.fail(reasonExpectKey, i)
	}
	ks := i
	if i, esc = s.str(i); i < 0 {
		return nil, false, -1
	}
	key = b[ks+1 : i-1]
	i = ws(b, i)
	if i >= len(b) {
		return nil, false, s.fail(reasonEOF, i)
	}
	if b[i] != ':' {
		return nil, false, s.fail(reasonExpectColon, i)
	}
	i = ws(b, i+1)
	if i >= len(b) {
		return nil, false, s.fail(reasonEOF, i)
	}
	return key, esc, i
}

// after skips whitespace after a member or element and returns the index of the next
// one (after a comma, done false) or just past the closing bracket close (done true).
func (s *scanner) after(i int, close byte) (int, bool) {
	b := s.b
	i = ws(b, i)
	if i >= len(b) {
		return s.fail(reasonEOF, i), true
	}
	switch b[i] {
	case ',':
		i = ws(b, i+1)
		if i >= len(b) {
			return s.fail(reasonEOF, i), true
		}
		return i, false
	case close:
		return i + 1, true
	}
	return s.fail(reasonExpectComma, i), true
}

// rawEqual reports whether the contents of a JSON string as sent (raw; esc: it has
// backslash escapes) decode to name.
func rawEqual(raw []byte, esc bool, name string) bool {
	if !esc {
		return string(raw) == name
	}
	return equalUnescaped(raw, name)
}

// strSlow continues validating a string from b[i] (inside it); esc says whether an
// escape was seen already.
func (s *scanner) strSlow(i int, esc bool) (int, bool) {
	b := s.b
	for {
		// Sixteen bytes at a time while no byte needs attention (two independent
		// words per round keep the CPU busier than one), then eight.
		for i+16 <= len(b) {
			m0 := strSpecial(binary.LittleEndian.Uint64(b[i:]))
			m1 := strSpecial(binary.LittleEndian.Uint64(b[i+8:]))
			if m0|m1 != 0 {
				if m0 != 0 {
					i += bits.TrailingZeros64(m0) >> 3
				} else {
					i += 8 + bits.TrailingZeros64(m1)>>3
				}
				goto special
			}
			i += 16
		}
		i = strRun(b, i)
		if i >= len(b) {
			return s.fail(reasonUnterminated, i), false
		}
	special:
		switch c := b[i]; {
		case c == '"':
			return i + 1, esc
		case c == '\\':
			esc = true
			if i+1 >= len(b) {
				return s.fail(reasonUnterminated, len(b)), false
			}
			e := b[i+1]
			if escapable[e] {
				i += 2
				break
			}
			if e != 'u' || i+6 > len(b) ||
				hexVal[b[i+2]]|hexVal[b[i+3]]|hexVal[b[i+4]]|hexVal[b[i+5]] == 0xff {
				return s.fail(reasonBadEscape, i), false
			}
			i += 6
		case c < 0x20:
			return s.fail(reasonControl, i), false
		default:
			// A run of non-ASCII text: validate it here rather than going back to
			// the word loop for every rune.
			for i < len(b) && b[i] >= 0x80 {
				n := utf8Len(b, i)
				if n == 0 {
					return s.fail(reasonBadUTF8, i), false
				}
				i += n
			}
		}
	}
}

// num validates the number starting at b[i] ('-' or a digit) and returns the index
// after it, and whether it is an integer (no fraction, no exponent).
func (s *scanner) num(i int) (int, bool) {
	b := s.b
	start := i
	if b[i] == '-' {
		i++
		if i >= len(b) {
			return s.fail(reasonBadNumber, start), false
		}
	}
	switch c := b[i]; {
	case c == '0':
		i++
	case c-'1' < 9:
		i = digits(b, i+1)
	default:
		return s.fail(reasonBadNumber, start), false
	}
	integer := true
	if i < len(b) && b[i] == '.' {
		integer = false
		d := i + 1
		if i = digits(b, d); i == d {
			return s.fail(reasonBadNumber, start), false
		}
	}
	if i < len(b) && b[i]|0x20 == 'e' {
		integer = false
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		d := i
		if i = digits(b, d); i == d {
			return s.fail(reasonBadNumber, start), false
		}
	}
	return i, integer
}

// digits returns the index after the run of decimal digits starting at b[i].
func digits(b []byte, i int) int {
	for i < len(b) && b[i]-'0' < 10 {
		i++
	}
	return i
}

// literal validates true, false or null at b[i] and returns the index after it.
func (s *scanner) literal(i int) int {
	b := s.b
	switch b[i] {
	case 't':
		if i+4 <= len(b) && string(b[i:i+4]) == "true" {
			return i + 4
		}
	case 'f':
		if i+5 <= len(b) && string(b[i:i+5]) == "false" {
			return i + 5
		}
	case 'n':
		if i+4 <= len(b) && string(b[i:i+4]) == "null" {
			return i + 4
		}
	}
	return s.fail(reasonBadLiteral, i)
}

// value validates the JSON value starting exactly at b[i] (whitespace already skipped),
// inside depth open containers, and returns the index after it.
func (s *scanner) value(i, depth int) int {
	b := s.b
	if i >= len(b) {
		return s.fail(reasonEOF, i)
	}
	switch c := b[i]; c {
	case '"':
		// Inline rather than str: the strings of members nobody reads (tool
		// descriptions in a list) come this way (BenchmarkRewrite/StripListNames50).
		j := strRun(b, i+1)
		if j < len(b) && b[j] == '"' {
			return j + 1
		}
		i, _ = s.strSlow(j, false)
		return i
	case '{', '[':
		return s.container(i, depth)
	case 't', 'f', 'n':
		return s.literal(i)
	default:
		if c == '-' || c-'0' < 10 {
			i, _ = s.num(i)
			return i
		}
	}
	return s.fail(reasonUnexpected, i)
}

// container validates the object or array opening at b[i], inside depth open
// containers. It is a loop over an explicit bit stack (1 = object), not a recursion,
// so that deep input costs neither Go stack nor time beyond the MaxDepth check. It
// scans its strings inline rather than calling str: it is where large payloads spend
// their time (BenchmarkEnvelope/codec/result2k6, the tool arguments in call199).
func (s *scanner) container(i, depth int) int {
	b := s.b
	var stack [(MaxDepth + 63) / 64]uint64
	d := 0 // containers opened here and not yet closed
	var c byte
	var obj bool

open: // b[i] is '{' or '['
	if depth+d >= MaxDepth {
		return s.fail(reasonTooDeep, i)
	}
	obj = b[i] == '{'
	if obj {
		stack[d>>6] |= 1 << (d & 63)
	} else {
		stack[d>>6] &^= 1 << (d & 63)
	}
	d++
	i = ws(b, i+1)
	if i >= len(b) {
		return s.fail(reasonEOF, i)
	}
	c = b[i]
	if c == '}' || c == ']' {
		goto closing
	}
	if !obj {
		goto value
	}

key: // b[i] should start an object key
	if b[i] != '"' {
		return s.fail(reasonExpectKey, i)
	}
	if j := strRun(b, i+1); j < len(b) && b[j] == '"' {
		i = j + 1
	} else if i, _ = s.strSlow(j, false); i < 0 {
		return -1
	}
	i = ws(b, i)
	if i >= len(b) || b[i] != ':' {
		if i >= len(b) {
			return s.fail(reasonEOF, i)
		}
		return s.fail(reasonExpectColon, i)
	}
	i = ws(b, i+1)
	if i >= len(b) {
		return s.fail(reasonEOF, i)
	}

value: // b[i] should start a value
	switch c = b[i]; c {
	case '"':
		if j := strRun(b, i+1); j < len(b) && b[j] == '"' {
			i = j + 1
		} else if i, _ = s.strSlow(j, false); i < 0 {
			return -1
		}
	case '{', '[':
		goto open
	case 't', 'f', 'n':
		if i = s.literal(i); i < 0 {
			return -1
		}
	default:
		if c != '-' && c-'0' >= 10 {
			return s.fail(reasonUnexpected, i)
		}
		if i, _ = s.num(i); i < 0 {
			return -1
		}
	}

next: // after a value inside the innermost open container
	i = ws(b, i)
	if i >= len(b) {
		return s.fail(reasonEOF, i)
	}
	c = b[i]
	if c == ',' {
		i = ws(b, i+1)
		if i >= len(b) {
			return s.fail(reasonEOF, i)
		}
		if stack[(d-1)>>6]&(1<<((d-1)&63)) != 0 {
			goto key
		}
		goto value
	}

closing: // b[i] should close the innermost open container
	obj = stack[(d-1)>>6]&(1<<((d-1)&63)) != 0
	if (obj && c != '}') || (!obj && c != ']') {
		return s.fail(reasonExpectComma, i)
	}
	i++
	d--
	if d == 0 {
		return i
	}
	goto next
}

// hasPrefixUnescaped reports whether the JSON string contents raw (escapes intact,
// already validated), once decoded, start with prefix; n is the number of raw bytes
// that encode the prefix. It decodes on the fly so that escaped keys and names are
// matched without a buffer.
func hasPrefixUnescaped(raw []byte, prefix string) (n int, ok bool) {
	j := 0 // bytes of prefix matched
	i := 0
	var tmp [4]byte
	for j < len(prefix) {
		if i >= len(raw) {
			return 0, false
		}
		c := raw[i]
		if c != '\\' {
			if c != prefix[j] {
				return 0, false
			}
			i++
			j++
			continue
		}
		r, w := decodeEscape(raw, i)
		if w == 0 {
			return 0, false
		}
		i += w
		k := encodeRune(tmp[:], r)
		if j+k > len(prefix) || string(tmp[:k]) != prefix[j:j+k] {
			return 0, false
		}
		j += k
	}
	return i, true
}

// equalUnescaped reports whether the JSON string contents raw decode to exactly s. It
// is the slow path of rawEqual, kept out of line so that rawEqual inlines.
//
//go:noinline
func equalUnescaped(raw []byte, s string) bool {
	n, ok := hasPrefixUnescaped(raw, s)
	return ok && n == len(raw)
}
