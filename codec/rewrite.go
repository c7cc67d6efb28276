package codec

import "unsafe"

// Splice replaces the bytes Old of a message with New. Old must be a sub-slice of the
// message (a view from Scan, or a re-slice of one); an empty Old, such as m.Name[:0],
// inserts New at its position.
type Splice struct {
	Old []byte
	New []byte
}

// offsetIn returns the offset of the sub-slice sub within msg. It panics if sub is not
// inside msg: splicing someone else's bytes is a programming error that must not
// silently produce a corrupt message.
func offsetIn(msg, sub []byte) int {
	if cap(sub) == 0 {
		// Go does not advance the pointer of a zero-capacity slice, so the only
		// position such a view can name is the end of msg's backing array.
		if len(sub) == 0 && cap(msg) == len(msg) {
			return len(msg)
		}
		panic("codec: splice target is not a sub-slice of the message")
	}
	off := int(uintptr(unsafe.Pointer(unsafe.SliceData(sub))) - uintptr(unsafe.Pointer(unsafe.SliceData(msg))))
	if off < 0 || off > len(msg) || len(sub) > len(msg)-off {
		panic("codec: splice target is not a sub-slice of the message")
	}
	return off
}

// AppendSplices appends msg to dst with every splice applied. The splices may come in
// any order (s is sorted in place by position; inserts at one position keep their
// order) but must not overlap; overlapping splices, or an Old outside msg, panic.
// It allocates only if dst must grow.
func AppendSplices(dst, msg []byte, s []Splice) []byte {
	// Insertion sort: splices come by the handful, usually already in order.
	for k := 1; k < len(s); k++ {
		sp := s[k]
		off := offsetIn(msg, sp.Old)
		j := k
		for j > 0 && offsetIn(msg, s[j-1].Old) > off {
			s[j] = s[j-1]
			j--
		}
		s[j] = sp
	}
	last := 0
	for k := range s {
		off := offsetIn(msg, s[k].Old)
		if off < last {
			panic("codec: overlapping splices")
		}
		dst = append(dst, msg[last:off]...)
		dst = append(dst, s[k].New...)
		last = off + len(s[k].Old)
	}
	return append(dst, msg[last:]...)
}

// appendReplaced appends msg to dst with old (a view into msg) replaced by new.
func appendReplaced(dst, msg, old, new []byte) []byte {
	off := offsetIn(msg, old)
	dst = append(dst, msg[:off]...)
	dst = append(dst, new...)
	return append(dst, msg[off+len(old):]...)
}

// AppendReplaceID appends msg, scanned into m, to dst with its id token replaced by
// newID (raw JSON: a number or a quoted string; any length). A message without an id
// (m.ID == nil) is copied unchanged.
func AppendReplaceID(dst, msg []byte, m *Message, newID []byte) []byte {
	if m.ID == nil {
		return append(dst, msg...)
	}
	return appendReplaced(dst, msg, m.ID, newID)
}

// AppendReplaceProgressToken appends msg, scanned into m, to dst with
// params._meta.progressToken replaced by tok (raw JSON). A message without a progress
// token is copied unchanged.
func AppendReplaceProgressToken(dst, msg []byte, m *Message, tok []byte) []byte {
	if m.ProgressToken == nil {
		return append(dst, msg...)
	}
	return appendReplaced(dst, msg, m.ProgressToken, tok)
}

// AppendPrefixListNames appends the result value result (the raw result of a list
// response, such as tools/list) to dst with prefix added at the start of the string
// member field of every object in the array member list: with list "tools" and field
// "name", every result.tools[i].name. The prefix is escaped as needed. Elements that
// are not objects, or whose field is missing or not a string, are copied unchanged.
//
// The result is validated as it is copied (a parse *Error for invalid JSON); a result
// that is not an object, or whose list member is not an array, is an invalid-request
// *Error. On error dst is returned with its original length. A result without the list
// member is copied unchanged. With enough capacity in dst it does not allocate.
func AppendPrefixListNames(dst, result []byte, list, field, prefix string) ([]byte, error) {
	return rewriteList(dst, result, list, field, prefix, false)
}

// AppendStripListNames is the converse of AppendPrefixListNames: it removes prefix
// from the start of result.<list>[i].<field> wherever the decoded string starts with
// it, and leaves the other elements unchanged. Escaped names are compared decoded.
func AppendStripListNames(dst, result []byte, list, field, prefix string) ([]byte, error) {
	return rewriteList(dst, result, list, field, prefix, true)
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

// isKey reports whether the raw key contents equal name.
func isKey(key []byte, esc bool, name string) bool {
	if esc {
		return equalUnescaped(key, name)
	}
	return string(key) == name
}

// rewriteList implements AppendPrefixListNames (strip false) and AppendStripListNames.
func rewriteList(dst, result []byte, list, field, prefix string, strip bool) ([]byte, error) {
	s := scanner{b: result}
	b := result
	dst0 := len(dst)
	last := 0 // result[:last] has been copied to dst
	i := ws(b, 0)
	if i >= len(b) {
		return dst, parseError(reasonEmpty, i)
	}
	if b[i] != '{' {
		start := i
		if i = s.value(i, 0); i >= 0 {
			if i = ws(b, i); i != len(b) {
				s.fail(reasonTrailing, i)
			}
		}
		s.invalid(reasonResultNotObject, start)
		return dst, s.err()
	}
	i = ws(b, i+1)
	if i >= len(b) {
		return dst, parseError(reasonEOF, i)
	}
	done := b[i] == '}'
	if done {
		i++
	}
	for !done {
		key, esc, v := s.member(i)
		if v < 0 {
			return dst[:dst0], s.err()
		}
		i = v
		switch {
		case !isKey(key, esc, list):
			i = s.value(i, 1)
		case b[i] != '[':
			s.invalid(reasonListNotArray, i)
			i = s.value(i, 1)
		default:
			i = ws(b, i+1)
			if i >= len(b) {
				return dst[:dst0], parseError(reasonEOF, i)
			}
			elemsDone := b[i] == ']'
			if elemsDone {
				i++
			}
			for !elemsDone && i >= 0 {
				if b[i] != '{' {
					i = s.value(i, 2)
				} else {
					i = ws(b, i+1)
					if i >= len(b) {
						return dst[:dst0], parseError(reasonEOF, i)
					}
					objDone := b[i] == '}'
					if objDone {
						i++
					}
					for !objDone && i >= 0 {
						fkey, fesc, fv := s.member(i)
						if fv < 0 {
							return dst[:dst0], s.err()
						}
						i = fv
						if b[i] == '"' && isKey(fkey, fesc, field) {
							vs := i
							if i, _ = s.str(i); i < 0 {
								break
							}
							contents := vs + 1
							if strip {
								if n, ok := hasPrefixUnescaped(b[contents:i-1], prefix); ok {
									dst = append(dst, b[last:contents]...)
									last = contents + n
								}
							} else {
								dst = append(dst, b[last:contents]...)
								dst = appendEscaped(dst, prefix)
								last = contents
							}
						} else {
							i = s.value(i, 3)
						}
						if i >= 0 {
							i, objDone = s.after(i, '}')
						}
					}
				}
				if i >= 0 {
					i, elemsDone = s.after(i, ']')
				}
			}
		}
		if i < 0 {
			return dst[:dst0], s.err()
		}
		i, done = s.after(i, '}')
		if i < 0 {
			return dst[:dst0], s.err()
		}
	}
	if i = ws(b, i); i != len(b) {
		s.fail(reasonTrailing, i)
	}
	if err := s.err(); err != nil {
		return dst[:dst0], err
	}
	return append(dst, b[last:]...), nil
}
