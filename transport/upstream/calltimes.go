package upstream

import (
	"hash/maphash"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/internal/mono"
)

// CallTimes records how long each kind of call recently took on one backend, so that
// a pipelined connection in HTTPOptions.PipelineShort mode carries only calls predicted
// to be short, and queues requests only behind those. A kind is the method, and for
// tools/call, prompts/get and resources/read the tool, prompt or resource as well:
// calls of one kind take similar times, and the name is what tells an echo from a tool
// that runs for seconds.
//
// Two figures are kept per kind, because the time a call is seen to take is its own
// plus the queueing of a busy machine (on a saturated 2-core machine most calls of an
// echo tool take 0.5-1 ms from the router's side, and one in a few hundred over 5 ms):
//
//   - typical, a decaying minimum: a shorter call sets it, a longer one raises it a
//     sixteenth of the way. It follows what the kind costs, not the queues, and is
//     what a request counts for those queued behind it (see pipeConn.owed);
//   - worst, a decaying maximum: a longer call sets it, a shorter one brings it an
//     eighth of the way down, so that one slow call keeps its kind off the pipeline for
//     the calls after it, the more the slower it was (about 7.5·ln(t/bound) calls: 5
//     after 10 ms against a 5 ms bound, 52 after 5 s).
//
// A kind is short when at least shortWarmup calls of it were seen, its typical time is
// within PipelineShortBound and its worst within slowFactor times that.
//
// The record is a fixed table of callSlots words, each indexed and tagged by a kind's
// hash and updated by compare-and-swap: bounded whatever names clients send (a kind
// that loses its slot to another is unknown again, which costs it the pipeline, never
// safety), no lock and no allocation per call. A word packs
//
//	tag (24 bits) | typical in µs (16) | worst in 100 µs (16) | calls seen (8)
//
// each figure saturating (typical at 65 ms, worst at 6.5 s: far past any bound). One
// CallTimes may be shared by the Conns of one backend (their sessions): it is safe
// for concurrent use.
type CallTimes struct {
	slots [callSlots]atomic.Uint64
}

// callSlots is the table's size: 2 KiB, more than the tools a backend usually has.
const callSlots = 256

// shortWarmup is how many calls of a kind must have been seen (on the ordinary pool)
// before it may use the pipeline: the first calls of a kind are the likeliest to be
// slow (a cold cache, a lazy start), and an unknown kind must never collect followers.
const shortWarmup = 8

// slowFactor: a kind whose worst recent call took more than this many times
// PipelineShortBound is not short. With the default bound, 5 ms: over the tail that
// queueing alone gives a short call on a saturated machine (measured: one call in a
// few hundred), so that load does not take the pipeline away, well under the calls
// that are slow by nature (a tool that sleeps, waits on I/O or runs for seconds).
const slowFactor = 5

// Fields of a slot's word, and the unit of worst.
const (
	figBits   = 16
	seenBits  = 8
	maxFig    = 1<<figBits - 1
	maxSeen   = 1<<seenBits - 1
	tagShift  = 2*figBits + seenBits
	typShift  = figBits + seenBits
	worstUnit = 100 * time.Microsecond
	slotIndex = callSlots - 1
)

// slowSample is what a call that proved slow without a time of its own (an event
// stream) is recorded as: worst's ceiling, so that its kind stays off the pipeline for
// about fifty calls.
const slowSample = maxFig * worstUnit

// NewCallTimes returns an empty record.
func NewCallTimes() *CallTimes { return new(CallTimes) }

// callKind identifies a kind of call by a hash of what it is; 0 is no kind (a batch,
// or a message that could not be scanned), which is never short.
type callKind uint64

// kindSeed keys the kinds' hash: per process, so that names chosen to collide here
// would have to be chosen anew on every start.
var kindSeed = maphash.MakeSeed()

// kindOf is the kind of m (nil: a batch), from the method and name the scan already
// found: nothing is parsed again.
func kindOf(m *codec.Message) callKind {
	if m == nil {
		return 0
	}
	h := maphash.Bytes(kindSeed, m.Method)
	if named(m.Method) {
		name := m.Name
		if name == nil {
			name = m.URI
		}
		h ^= maphash.Bytes(kindSeed, name) * 0x9e3779b97f4a7c15
	}
	return callKind(h | 1) // never 0
}

// named reports the methods whose target (params.name or params.uri) is part of their
// kind: the ones the router routes by name.
func named(method []byte) bool {
	switch string(method) {
	case "tools/call", "prompts/get", "resources/read":
		return true
	}
	return false
}

// callStat is a kind's figures, unpacked from its slot's word.
type callStat struct {
	typical uint64 // µs
	worst   uint64 // worstUnit
	seen    uint64
}

func unpack(w uint64) (tag uint64, st callStat) {
	return w >> tagShift, callStat{w >> typShift & maxFig, w >> seenBits & maxFig, w & maxSeen}
}

func (st callStat) pack(tag uint64) uint64 {
	return tag<<tagShift | st.typical<<typShift | st.worst<<seenBits | st.seen
}

// slot returns k's word and its tag.
func (t *CallTimes) slot(k callKind) (*atomic.Uint64, uint64) {
	return &t.slots[uint64(k)&slotIndex], uint64(k) >> tagShift
}

// predict returns k's typical time in µs, and whether k is short: seen at least
// shortWarmup times, typically within bound µs and at worst within slowFactor times
// that.
func (t *CallTimes) predict(k callKind, bound int64) (int64, bool) {
	if k == 0 {
		return 0, false
	}
	s, tag := t.slot(k)
	wtag, st := unpack(s.Load())
	if wtag != tag || st.seen < shortWarmup {
		return 0, false
	}
	worst := time.Duration(st.worst) * worstUnit
	return int64(st.typical), int64(st.typical) <= bound && worst <= slowFactor*time.Duration(bound)*time.Microsecond
}

// record books one call of kind k that took d.
func (t *CallTimes) record(k callKind, d time.Duration) {
	if k == 0 {
		return
	}
	d = max(d, 0)
	us := uint64(min(d/time.Microsecond, maxFig))
	units := uint64(min((d+worstUnit-1)/worstUnit, maxFig))
	s, tag := t.slot(k)
	for {
		old := s.Load()
		st := callStat{us, units, 1}
		if otag, o := unpack(old); otag == tag {
			st = callStat{decayMin(o.typical, us), decayMax(o.worst, units), min(o.seen+1, maxSeen)}
		}
		w := st.pack(tag)
		if w == old || s.CompareAndSwap(old, w) {
			return
		}
	}
}

// decayMin is typical after a call that took v: v if shorter, else a sixteenth of the
// way up to it.
func decayMin(typ, v uint64) uint64 {
	if v <= typ {
		return v
	}
	return typ + (v-typ+15)/16
}

// decayMax is worst after a call that took v: v if longer, else an eighth of the way
// down to it.
func decayMax(worst, v uint64) uint64 {
	if v >= worst {
		return v
	}
	return worst - (worst-v+7)/8
}

// kindOf is m's kind when the pipeline keeps a record (PipelineShort), else 0: the
// hash is not worth taking for nothing.
func (p *pipeline) kindOf(m *codec.Message) callKind {
	if p == nil || p.calls == nil {
		return 0
	}
	return kindOf(m)
}

// recordReply books a reply to a call of kind k that took d on the backend (in
// PipelineShort mode; nothing otherwise). An event stream counts as slow whatever its
// head's time: it may run on for any length, and a pipelined connection takes nothing
// behind it meanwhile.
func (p *pipeline) recordReply(k callKind, d time.Duration, stream bool) {
	if p == nil || p.calls == nil {
		return
	}
	if stream {
		d = slowSample
	}
	p.calls.record(k, d)
}

// recordLate books a call of kind k that failed or was given up after d: as that
// long when d is past the bound (the call would have taken longer still), not at all
// otherwise (how long it would have taken is unknown).
func (p *pipeline) recordLate(k callKind, d time.Duration) {
	if p == nil || p.calls == nil || d.Microseconds() <= p.bound {
		return
	}
	p.calls.record(k, d)
}

// poolStart is when a call the pipeline did not take goes out on the ordinary pool,
// on the monotonic clock, for poolDone; 0 when no record is kept.
func (p *pipeline) poolStart() int64 {
	if p == nil || p.calls == nil {
		return 0
	}
	return mono.Nanos()
}

// poolDone books a call of kind k sent on the pool at start (poolStart): the time to
// its reply's head, or its failure (err). Pooled calls are how a kind becomes known,
// and how a slow kind stays known as slow.
func (p *pipeline) poolDone(k callKind, start int64, resp *fasthttp.Response, err error) {
	if p == nil || p.calls == nil {
		return
	}
	d := time.Duration(mono.Nanos() - start)
	if err != nil {
		p.recordLate(k, d)
		return
	}
	p.recordReply(k, d, isSSE(resp))
}
