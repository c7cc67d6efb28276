package fleet

import (
	"bytes"

	"github.com/mcprouter/mcprouter/codec"
)

// The per-request _meta keys of 2026-07-28 on their way to a 2025 backend: a stateless
// client's request loses them on the forwarding path (forward.go), which is why this
// lives apart from the rest of the stateless clients' side (modern_client.go).

// forLegacyBackend turns the wire form of a stateless client's request e (bp) into what
// a 2025 backend c expects: without the per-request _meta keys of 2026-07-28, which a
// server that speaks both generations would take for a stateless request of its own
// (and judge against its session's version). Other requests pass as they are.
func forLegacyBackend(c *upConn, e *entry, bp *[]byte) *[]byte {
	if c.modern || e.x == nil || !e.x.Stateless {
		return bp
	}
	out := getBuf()
	*out = stripModernMeta((*out)[:0], *bp)
	putBuf(bp)
	return out
}

// stripModernMeta appends msg without the io.modelcontextprotocol/ keys of its
// params._meta (a progress token and the client's own keys stay).
func stripModernMeta(dst, msg []byte) []byte {
	var m codec.Message
	if codec.Scan(msg, &m) != nil {
		return append(dst, msg...)
	}
	meta := memberValue(m.Params, "_meta")
	var w codec.Walker
	if meta == nil || !w.Object(meta) {
		return append(dst, msg...)
	}
	off := func(v []byte) int { return cap(msg) - cap(v) }
	kept := make([]byte, 0, len(meta))
	kept = append(kept, '{')
	dropped := false
	for key, _, val, ok := w.Next(); ok; key, _, val, ok = w.Next() {
		if bytes.HasPrefix(key, []byte(modernKeyPrefix)) {
			dropped = true
			continue
		}
		if len(kept) > 1 {
			kept = append(kept, ',')
		}
		kept = append(kept, msg[off(key)-1:off(val)+len(val)]...)
	}
	if !dropped {
		return append(dst, msg...)
	}
	kept = append(kept, '}')
	return codec.AppendSplices(dst, msg, []codec.Splice{{Old: meta, New: kept}})
}

// modernKeyPrefix starts the _meta keys the revisions reserve.
const modernKeyPrefix = "io.modelcontextprotocol/"

// memberValue returns the raw value of member key of the JSON object obj, nil if none.
func memberValue(obj []byte, key string) []byte {
	var w codec.Walker
	if !w.Object(obj) {
		return nil
	}
	for k, _, v, ok := w.Next(); ok; k, _, v, ok = w.Next() {
		if string(k) == key {
			return v
		}
	}
	return nil
}
