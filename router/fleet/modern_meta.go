package fleet

import (
	"bytes"

	"github.com/mcprouter/mcprouter/codec"
)

// The per-request _meta keys of 2026-07-28 on their way to a 2025 backend: a stateless
// client's request loses them on the forwarding path (forward.go), which is why this
// lives apart from the rest of the stateless clients' side (modern_client.go).
//
// A 2025 backend must not see them: a server that speaks both generations would take
// the request for a stateless one of its own (and judge it against its session's
// version). They are cut out by splices (appendMetaCuts) that join the id's and the
// progress token's in appendWire, so the request is written once, in one pass, from the
// views the codec's one scan gave (codec.Message.Meta); the client's own keys and its
// progress token stay.

// appendMetaCuts adds to sp, within its capacity, the splices that remove the
// io.modelcontextprotocol/ members of meta (a params._meta object, a view into the
// message the splices apply to), and returns it; all is false when there was no room
// for every cut (those returned are still a valid subset). Each run of such members
// goes with one comma, so what is left is valid JSON: after a kept member, from the
// end of its value; at the start, up to the next kept member's key; all of them, the
// whole inside of the braces.
//
// It never grows sp: growing it would copy the caller's splices to the heap, and with
// them the stack arrays their New point into (appendWire's id).
func appendMetaCuts(sp []codec.Splice, meta []byte) (_ []codec.Splice, all bool) {
	var w codec.Walker
	if !w.Object(meta) {
		return sp, true
	}
	off := func(v []byte) int { return cap(meta) - cap(v) }
	cut := func(from, to int) bool {
		if len(sp) == cap(sp) {
			return false
		}
		sp = sp[:len(sp)+1]
		sp[len(sp)-1] = codec.Splice{Old: meta[from:to]}
		return true
	}
	// cutRun cuts the run of members from runStart to runEnd: with the comma after the
	// member before it (which ends at prev), else up to next (the next key's quote, or
	// the run's end when nothing follows).
	cutRun := func(prev, runStart, runEnd, next int) bool {
		if prev >= 0 {
			return cut(prev, runEnd)
		}
		return cut(runStart, next)
	}
	prevEnd := -1               // end of the previous member's value, -1 before the first
	runStart, runPrev := -1, -1 // the current run of dropped members: its first key, the end before it
	runEnd := 0
	for key, _, val, ok := w.Next(); ok; key, _, val, ok = w.Next() {
		start, end := off(key)-1, off(val)+len(val) // from the key's opening quote
		if bytes.HasPrefix(key, []byte(modernKeyPrefix)) {
			if runStart < 0 {
				runStart, runPrev = start, prevEnd
			}
			runEnd = end
		} else if runStart >= 0 {
			if !cutRun(runPrev, runStart, runEnd, start) {
				return sp, false
			}
			runStart = -1
		}
		prevEnd = end
	}
	if runStart >= 0 && !cutRun(runPrev, runStart, runEnd, runEnd) {
		return sp, false
	}
	return sp, true
}

// stripModernMeta appends msg without the io.modelcontextprotocol/ keys of its
// params._meta (a progress token and the client's own keys stay): appendMetaCuts on a
// message of its own, for a request whose _meta has more runs of them than appendWire
// has room for cuts (then a round for each roomful).
func stripModernMeta(dst, msg []byte) []byte {
	for {
		var m codec.Message
		if codec.Scan(msg, &m) != nil {
			return append(dst, msg...)
		}
		var spa [metaCuts]codec.Splice
		sp, all := appendMetaCuts(spa[:0], m.Meta)
		if all {
			return codec.AppendSplices(dst, msg, sp)
		}
		msg = codec.AppendSplices(nil, msg, sp)
	}
}

// metaCuts is how many runs of the revision's _meta keys one pass cuts: a request has
// at most five such keys, usually in one run.
const metaCuts = 8

// modernKeyPrefix starts the _meta keys the revisions reserve.
const modernKeyPrefix = codec.ReservedMetaPrefix

// metaInside returns the span of a params._meta object (meta, as codec.Scan recorded it)
// between its first member's key and the end of its last value: what appendMetaCuts
// cuts when every member is one of the revision's (codec.MetaReserved), found without
// walking the members.
func metaInside(meta []byte) []byte {
	from, to := 1, len(meta)-1 // inside the braces
	for from < to && isSpace(meta[from]) {
		from++
	}
	for to > from && isSpace(meta[to-1]) {
		to--
	}
	return meta[from:to]
}

// isSpace reports whether c is JSON whitespace.
func isSpace(c byte) bool { return c == ' ' || c == '\n' || c == '\r' || c == '\t' }
