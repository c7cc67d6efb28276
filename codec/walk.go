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
// Keys are raw string contents with escapes intact (esc says so; Unquote decodes them).
// A Walker is a value of a few words meant to live on the caller's stack; it is not
// safe for concurrent use. It never allocates unless Err returns an error.
type Walker struct {
	s     scanner
	i     int  // index of the next member or element, or past the end when done
	close byte // '}' or ']'
	done  bool
}

// Object starts a walk of the JSON object b (whitespace around it allowed) and reports
// whether b starts with one.
func (w *Walker) Object(b []byte) bool { return w.start(b, '{', '}') }

// Array starts a walk of the JSON array b (whitespace around it allowed) and reports
// whether b starts with one.
func (w *Walker) Array(b []byte) bool { return w.start(b, '[', ']') }

func (w *Walker) start(b []byte, open, close byte) bool {
	*w = Walker{s: scanner{b: b}, close: close, done: true}
	i := ws(b, 0)
	if i >= len(b) || b[i] != open {
		return false
	}
	w.i, w.done = w.s.open(i, close)
	return true
}

// Next returns the next member of the object (key, whether it has escapes, value) or
// element of the array (value only), and ok false at the end or after malformed input
// (then Err says what and where).
func (w *Walker) Next() (key []byte, esc bool, val []byte, ok bool) {
	if w.done {
		return nil, false, nil, false
	}
	s := &w.s
	v := w.i
	if w.close == '}' {
		if key, esc, v = s.member(w.i); v < 0 {
			w.done = true
			return nil, false, nil, false
		}
	}
	end := s.value(v, 1)
	if end < 0 {
		w.done = true
		return nil, false, nil, false
	}
	w.i, w.done = s.after(end, w.close)
	if w.i < 0 {
		return nil, false, nil, false
	}
	return key, esc, s.b[v:end], true
}

// Err returns the parse error (an *Error matching ErrParse) that ended the walk, or nil.
func (w *Walker) Err() error {
	if w.s.perr {
		return parseError(w.s.preason, w.s.poff)
	}
	return nil
}
