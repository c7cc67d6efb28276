package router

import (
	"bytes"
	"hash/maphash"
	"sync/atomic"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/router/modern"
	"github.com/mcprouter/mcprouter/router/params"
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

// metaMemo is one _meta read: its bytes (never written after it is stored), what
// modern.ReadMetaOf read from them, as views into those bytes, and the judgement of
// its schema (params.ValidateJudged: a request carrying it has the rest of its params
// checked, and the _meta only once).
type metaMemo struct {
	raw    []byte
	meta   modern.Meta
	judged params.Judgement
	// client is a copy of meta's capabilities and clientInfo, which the Sessions of
	// requests carrying this _meta share (statelessSession).
	client *clientFields
}

// metaMemos are the _meta kept, by a hash of their bytes.
type metaMemos struct {
	seed  maphash.Seed
	slots [metaMemoSlots]atomic.Pointer[metaMemo]
}

func newMetaMemos() *metaMemos { return &metaMemos{seed: maphash.MakeSeed()} }

// read reads the _meta of request m into meta, from a kept copy when it is one, and
// returns that copy (nil when m's _meta is not kept): meta's views are then into it
// (immutable, and kept alive by whoever holds them: a Session may keep them without
// copying) rather than into m.
func (mm *metaMemos) read(m *codec.Message, meta *modern.Meta) *metaMemo {
	raw := m.Meta
	if m.Flags&codec.MetaReserved == 0 || len(raw) > metaMemoMax {
		modern.ReadMetaOf(m, meta)
		return nil
	}
	slot := &mm.slots[maphash.Bytes(mm.seed, raw)%metaMemoSlots]
	if e := slot.Load(); e != nil && bytes.Equal(e.raw, raw) {
		*meta = e.meta
		return e
	}
	e := &metaMemo{raw: append([]byte(nil), raw...)}
	modern.ReadMetaOf(&codec.Message{Meta: e.raw}, &e.meta)
	e.client = newClientFields(e.meta.Capabilities, e.meta.ClientInfo)
	slot.Store(e)
	*meta = e.meta
	return e
}

// judgement is the Judgement of the _meta's bytes e holds, nil for none (nil e).
func (e *metaMemo) judgement() *params.Judgement {
	if e == nil {
		return nil
	}
	return &e.judged
}
