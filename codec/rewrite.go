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
// any order (inserts at one position keep their order) but must not overlap;
// overlapping splices, or an Old outside msg, panic. It allocates only if dst must grow.
//
// s is only read, never written (it used to be sorted in place): a function that
// stores into its argument's elements makes what they point to escape, so every
// caller's New (an id formatted into a stack array) went to the heap. The order is
// sorted on the stack instead.
func AppendSplices(dst, msg []byte, s []Splice) []byte {
	if len(s) > maxSortedSplices {
		return appendManySplices(dst, msg, s)
	}
	// Insertion sort of (offset, index): splices come by the handful, usually in order.
	var offs [maxSortedSplices]int
	var order [maxSortedSplices]uint8
	for k := range s {
		off := offsetIn(msg, s[k].Old)
		j := k
		for ; j > 0 && offs[j-1] > off; j-- {
			offs[j], order[j] = offs[j-1], order[j-1]
		}
		offs[j], order[j] = off, uint8(k)
	}
	last := 0
	for j := range s {
		dst, last = appendSplice(dst, msg, last, offs[j], &s[order[j]])
	}
	return append(dst, msg[last:]...)
}

// maxSortedSplices is how many splices AppendSplices orders on the stack.
const maxSortedSplices = 16

// appendManySplices is AppendSplices for more splices than it orders on the stack:
// it takes them by position, then by their place in s, with a selection.
func appendManySplices(dst, msg []byte, s []Splice) []byte {
	last, prevOff, prevK := 0, -1, -1
	for range s {
		next, nextOff := -1, 0
		for k := range s {
			off := offsetIn(msg, s[k].Old)
			if off < prevOff || off == prevOff && k <= prevK {
				continue // taken already
			}
			if next < 0 || off < nextOff {
				next, nextOff = k, off
			}
		}
		dst, last = appendSplice(dst, msg, last, nextOff, &s[next])
		prevOff, prevK = nextOff, next
	}
	return append(dst, msg[last:]...)
}

// appendSplice appends msg[last:off], then sp.New, sp.Old being at off; it returns where
// msg resumes after sp.Old.
func appendSplice(dst, msg []byte, last, off int, sp *Splice) ([]byte, int) {
	if off < last {
		panic("codec: overlapping splices")
	}
	dst = append(dst, msg[last:off]...)
	dst = append(dst, sp.New...)
	return dst, off + len(sp.Old)
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

// listRewrite is the state of one rewriteList: the scanner over the result, what to
// rewrite, and the output so far.
type listRewrite struct {
	s             scanner
	field, prefix string
	strip         bool
	dst           []byte
	last          int // result[:last] has been copied to dst
}

// rewriteList implements AppendPrefixListNames (strip false) and AppendStripListNames.
func rewriteList(dst, result []byte, list, field, prefix string, strip bool) ([]byte, error) {
	r := listRewrite{s: scanner{b: result}, field: field, prefix: prefix, strip: strip, dst: dst}
	s, b := &r.s, result
	i := ws(b, 0)
	if i >= len(b) || b[i] != '{' {
		s.notTop(reasonResultNotObject)
		return dst, s.err()
	}
	i, done := s.open(i, '}')
	for !done {
		key, esc, v := s.member(i)
		switch {
		case v < 0:
			i = -1
		case !rawEqual(key, esc, list):
			i = s.value(v, 1)
		case b[v] != '[':
			s.invalid(reasonListNotArray, v)
			i = s.value(v, 1)
		default:
			i = r.list(v)
		}
		if i < 0 {
			break
		}
		i, done = s.after(i, '}')
	}
	if i >= 0 {
		if i = ws(b, i); i != len(b) {
			s.fail(reasonTrailing, i)
		}
	}
	if err := s.err(); err != nil {
		return r.dst[:len(dst)], err
	}
	return append(r.dst, b[r.last:]...), nil
}

// list walks the list array at b[i] (depth 1) and rewrites the field of each element
// that is an object; other elements are only validated.
func (r *listRewrite) list(i int) int {
	s := &r.s
	i, done := s.open(i, ']')
	for !done {
		if s.b[i] == '{' {
			i = r.element(i)
		} else {
			i = s.value(i, 2)
		}
		if i < 0 {
			return -1
		}
		i, done = s.after(i, ']')
	}
	return i
}

// element walks one object of the list at b[i] and, when its field is a string, adds
// the prefix to it or strips the prefix from it (when the decoded string starts with
// it).
func (r *listRewrite) element(i int) int {
	s, b := &r.s, r.s.b
	i, done := s.open(i, '}')
	for !done {
		key, esc, v := s.member(i)
		if v < 0 {
			return -1
		}
		if b[v] != '"' || !rawEqual(key, esc, r.field) {
			i = s.value(v, 3)
		} else if i, _ = s.str(v); i >= 0 {
			from := v + 1 // the string's contents
			if !r.strip {
				r.dst = append(r.dst, b[r.last:from]...)
				r.dst = appendEscaped(r.dst, r.prefix)
				r.last = from
			} else if n, ok := hasPrefixUnescaped(b[from:i-1], r.prefix); ok {
				r.dst = append(r.dst, b[r.last:from]...)
				r.last = from + n
			}
		}
		if i < 0 {
			return -1
		}
		i, done = s.after(i, '}')
	}
	return i
}
