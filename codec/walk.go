package codec

// Walker walks the members of one JSON object, or the elements of one JSON array, in
// place with the scanner Scan uses: each value is validated as it is passed over and
// returned as a view of the input, nothing is decoded or built. It is for the layers
// above that must look inside a value Scan returned (params checked against a schema)
// without a tree and without allocating:
//
//	var w codec.Walker
//	if !w.Object(params) { ... not an object ... }
//	for key, esc, val, ok := w.Next(); ok; key, esc, val, ok = w.Next() { ... }
//	if err := w.Err(); err != nil { ... malformed ... }
//
// Next is Key then Value. To look inside a member's value without scanning it twice,
// call Key, then Enter a child Walker on the value, walk it, and Exit.
//
// Keys are raw string contents with escapes intact (esc says so; Unquote decodes them).
// A Walker is a value of a few words meant to live on the caller's stack; it is not
// safe for concurrent use. It never allocates unless Err returns an error.
type Walker struct {
	s       scanner
	i       int  // index of the next member, element or value, or past the end when done
	start   int  // index of the walked value's opening bracket
	close   byte // '}' or ']'
	done    bool
	onValue bool // Key has read a key; i is its value
}

// Object starts a walk of the JSON object b (whitespace around it allowed) and reports
// whether b starts with one.
func (w *Walker) Object(b []byte) bool { return w.begin(b, '{', '}') }

// Array starts a walk of the JSON array b (whitespace around it allowed) and reports
// whether b starts with one.
func (w *Walker) Array(b []byte) bool { return w.begin(b, '[', ']') }

func (w *Walker) begin(b []byte, open, close byte) bool {
	*w = Walker{s: scanner{b: b}, close: close, done: true}
	i := ws(b, 0)
	if i >= len(b) || b[i] != open {
		return false
	}
	w.start = i
	w.i, w.done = w.s.open(i, close)
	return true
}

// Next returns the next member of the object (key, whether it has escapes, value) or
// element of the array (value only), and ok false at the end or after malformed input
// (then Err says what and where).
func (w *Walker) Next() (key []byte, esc bool, val []byte, ok bool) {
	if w.close == '}' {
		if key, esc, ok = w.Key(); !ok {
			return nil, false, nil, false
		}
	}
	val, ok = w.Value()
	return key, esc, val, ok
}

// Key reads the key of the next member of the object and leaves the walker on its
// value, for Peek, Value or Enter; ok is false at the end or after malformed input.
func (w *Walker) Key() (key []byte, esc bool, ok bool) {
	if w.done || w.onValue {
		return nil, false, false
	}
	if key, esc, w.i = w.s.member(w.i); w.i < 0 {
		w.done = true
		return nil, false, false
	}
	w.onValue = true
	return key, esc, true
}

// Peek returns the first byte of the value the walker is on (after Key, or the next
// element of an array), or 0 at the end.
func (w *Walker) Peek() byte {
	if w.done || (w.close == '}' && !w.onValue) {
		return 0
	}
	return w.s.b[w.i]
}

// Value scans the value the walker is on and returns it; ok is false at the end or
// after malformed input.
func (w *Walker) Value() (val []byte, ok bool) {
	if w.done || (w.close == '}' && !w.onValue) {
		return nil, false
	}
	v := w.i
	end := w.s.value(v, 1)
	if end < 0 {
		w.done = true
		return nil, false
	}
	w.next(end)
	return w.s.b[v:end], w.i >= 0
}

// Pass moves the walker past the value it is on when v is that value whole: a view of
// it in the walked bytes (the same array, from the value's first byte to its last) that
// a scan validated already, as codec.Scan validated the views it records
// (Message.Meta). It does not scan v again, which is its point: for a caller that
// judged those bytes before (params.ValidateJudged). It reports whether it moved; when
// v does not start at the value the walker is on, it does nothing.
func (w *Walker) Pass(v []byte) bool {
	if w.close == '}' && !w.onValue || !w.On(v) {
		return false
	}
	w.next(w.i + len(v))
	return w.i >= 0
}

// On reports whether v is a view of the walked bytes that starts at the value the
// walker is on (after Key, or at an array's next element).
func (w *Walker) On(v []byte) bool {
	b := w.s.b
	return !w.done && len(v) > 0 && w.i >= 0 && w.i < len(b) && len(v) <= len(b)-w.i && &v[0] == &b[w.i]
}

// Enter starts child on the object or array the walker is on, without scanning it
// first, so that a nested value is walked once rather than once per level; it reports
// whether the value is an object or an array. Once child is done with it, Exit moves
// the walker past it.
func (w *Walker) Enter(child *Walker) bool {
	c := w.Peek()
	if c != '{' && c != '[' {
		return false
	}
	close := byte(']')
	if c == '{' {
		close = '}'
	}
	*child = Walker{s: scanner{b: w.s.b}, close: close, start: w.i}
	child.i, child.done = child.s.open(w.i, close)
	return true
}

// Exit moves the walker past the value child walked (scanning what child left of it)
// and returns that value; ok is false after malformed input, in child or after it.
func (w *Walker) Exit(child *Walker) (val []byte, ok bool) {
	for !child.done {
		if _, _, _, ok := child.Next(); !ok {
			break
		}
	}
	if child.s.perr {
		w.s.fail(child.s.preason, child.s.poff)
		w.done = true
		return nil, false
	}
	w.next(child.i)
	return w.s.b[child.start:child.i], w.i >= 0
}

// next moves the walker past the value that ends at end, to the next member or
// element or the end.
func (w *Walker) next(end int) {
	w.onValue = false
	w.i, w.done = w.s.after(end, w.close)
}

// Err returns the parse error (an *Error matching ErrParse) that ended the walk, or nil.
func (w *Walker) Err() error {
	if w.s.perr {
		return parseError(w.s.preason, w.s.poff)
	}
	return nil
}
