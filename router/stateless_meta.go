package router

import (
	"bytes"
	"hash/maphash"
	"sync/atomic"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/router/modern"
)

// The _meta of stateless requests, read once per kind of client. A 2026-07-28 client
// sends the same _meta with every request (its revision, capabilities and clientInfo),
// so the router keeps the last few it read, each with an immutable copy of its bytes:
// a request whose _meta is one of them costs a hash and a comparison instead of a walk
// (modern.ReadMetaOf), and its Session takes the client's capabilities and clientInfo
// from the copy instead of copying them again (statelessSession). A _meta that varies
// per request (a progressToken, a key of another namespace) or is long is read as
// before and not kept: MetaReserved (codec.Scan) tells which at no cost.

// metaMemoSlots is the number of _meta kept: clients of one kind send the same, so a
// few kinds at once are the rule; two kinds in one slot take turns, each read anew.
const metaMemoSlots = 16

// metaMemoMax is the longest _meta kept (a client's capabilities and clientInfo are a
// few hundred bytes).
const metaMemoMax = 1024

// metaMemo is one _meta read: its bytes (never written after it is stored) and what
// modern.ReadMetaOf read from them, as views into those bytes.
type metaMemo struct {
	raw  []byte
	meta modern.Meta
}

// metaMemos are the _meta kept, by a hash of their bytes.
type metaMemos struct {
	seed  maphash.Seed
	slots [metaMemoSlots]atomic.Pointer[metaMemo]
}

func newMetaMemos() *metaMemos { return &metaMemos{seed: maphash.MakeSeed()} }

// read reads the _meta of request m into meta, from a kept copy when it is one, and
// reports whether meta's views are into such a copy (immutable, and kept alive by
// whoever holds them: a Session may keep them without copying) rather than into m.
func (mm *metaMemos) read(m *codec.Message, meta *modern.Meta) (kept bool) {
	raw := m.Meta
	if m.Flags&codec.MetaReserved == 0 || len(raw) > metaMemoMax {
		modern.ReadMetaOf(m, meta)
		return false
	}
	slot := &mm.slots[maphash.Bytes(mm.seed, raw)%metaMemoSlots]
	if e := slot.Load(); e != nil && bytes.Equal(e.raw, raw) {
		*meta = e.meta
		return true
	}
	e := &metaMemo{raw: append([]byte(nil), raw...)}
	modern.ReadMetaOf(&codec.Message{Meta: e.raw}, &e.meta)
	slot.Store(e)
	*meta = e.meta
	return true
}
