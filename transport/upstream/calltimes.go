package upstream

import (
	"hash/maphash"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/internal/mono"
)

// CallTimes records how each kind of call recently went on one backend, so that a
// pipelined connection in HTTPOptions.PipelineShort mode carries only calls predicted
// to be short, and queues requests only behind those. A kind is the method, and for
// tools/call, prompts/get and resources/read the tool, prompt or resource as well:
// calls of one kind take similar times, and the name is what tells an echo from a tool
// that runs for seconds.
//
// Two figures are kept per kind:
//
//   - typical, a decaying minimum of its times: a shorter call sets it, a longer one
//     raises it a sixteenth of the way. It follows what the kind costs, not the queues
//     of a busy machine (on a saturated 2-core machine most calls of an echo tool take
//     0.5-1 ms from the router's side), and is what a request counts for those queued
//     behind it (see pipeConn.owed);
//   - clean, the calls of the kind since its last slow one (a call over slowFactor
//     times the bound, given up past the bound, answered with an event stream, or seen
//     waiting past that limit on a pipelined connection), saturating.
//
// A kind is short when its typical time is within PipelineShortBound and it made no
// slow call in its last shortClean calls. Why a count and not the last slow call's
// time: what costs the calls pipelined with a kind is how often it stalls, and a tool
// that answers at once but stalls one call in 50 or in 200 (a cache miss, a lock, a
// pause) must stay off the pipeline for good, where a record of its last stall that
// fades within a few calls let it back on between stalls, and each stall then delayed
// the calls queued behind it (bench/RESULTS.md, STALL and PIPE2). An unknown kind
// starts at no clean call, so it proves itself on the pool first.
//
// The record is a fixed table of callSlots words, each indexed and tagged by a kind's
// hash and updated by compare-and-swap: bounded whatever names clients send (a kind
// that loses its slot to another is unknown again, which costs it the pipeline, never
// safety), no lock and no allocation per call. A word packs
//
//	tag (32 bits) | typical in µs (16) | clean calls (16)
//
// each figure saturating (typical at 65 ms, far past any bound; clean at 65535). One
// CallTimes may be shared by the Conns of one backend (their sessions): it is safe
// for concurrent use.
type CallTimes struct {
	slots [callSlots]atomic.Uint64
}

// callSlots is the table's size: 2 KiB, more than the tools a backend usually has.
const callSlots = 256

// shortClean is how many calls of a kind in a row must not have been slow before it
// may use the pipeline. Against a kind that stalls one call in r, a run of shortClean
// clean calls comes after about one stall in e^(shortClean/r): with 1000, a kind that
// stalls 1 in 50 never pipelines, 1 in 200 after one stall in 150 (and only until its
// next), 1 in 10,000 for 90% of its calls. It is also the warm-up of a new kind: its
// first calls, the likeliest to be slow (a cold cache, a lazy start), take the pool.
const shortClean = 1000

// slowFactor: a call that took more than this many times PipelineShortBound counts as
// slow. With the default bound, 20 ms: over what queueing alone gives a short call on
// a saturated machine (measured on 2 shared cores at 16,000 echo calls/s, by the
// backend times the record is fed: 2% over 5 ms, 0.4% over 10 ms, 1 in 20,000 over
// 20 ms, none over 40 ms; a limit of 5 ms kept the echo tool off the pipeline half the
// time), well under the calls that are slow by nature (a tool that sleeps, waits on
// I/O or runs for seconds). A kind that stalls for less is not told from the noise:
// the calls queued behind such a stall wait for it, up to 20 ms.
const slowFactor = 20

// Fields of a slot's word.
const (
	figBits   = 16
	maxFig    = 1<<figBits - 1
	tagShift  = 2 * figBits
	typShift  = figBits
	slotIndex = callSlots - 1
)

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
	clean   uint64 // calls since the last slow one
}

func unpack(w uint64) (tag uint64, st callStat) {
	return w >> tagShift, callStat{w >> typShift & maxFig, w & maxFig}
}

func (st callStat) pack(tag uint64) uint64 {
	return tag<<tagShift | st.typical<<typShift | st.clean
}

// slot returns k's word and its tag.
func (t *CallTimes) slot(k callKind) (*atomic.Uint64, uint64) {
	return &t.slots[uint64(k)&slotIndex], uint64(k) >> tagShift
}

// predict returns k's typical time in µs, and whether k is short: typically within
// bound µs, and no slow call in its last shortClean.
func (t *CallTimes) predict(k callKind, bound int64) (int64, bool) {
	if k == 0 {
		return 0, false
	}
	s, tag := t.slot(k)
	wtag, st := unpack(s.Load())
	if wtag != tag {
		return 0, false
	}
	return int64(st.typical), st.clean >= shortClean && int64(st.typical) <= bound
}

// noTime is the time record is given for a call known slow without a time of its own
// (an event stream, a call still waiting): its kind's typical time is left as it was.
const noTime time.Duration = -1

// record books one call of kind k that took d (noTime: unknown), slow or not: a slow
// call starts its kind's count of clean calls over, any other adds one to it.
func (t *CallTimes) record(k callKind, d time.Duration, slow bool) {
	if k == 0 {
		return
	}
	us := uint64(maxFig)
	if d >= 0 {
		us = uint64(min(d/time.Microsecond, maxFig))
	}
	s, tag := t.slot(k)
	for {
		old := s.Load()
		st := callStat{typical: us, clean: 1}
		if otag, o := unpack(old); otag == tag {
			st.typical = o.typical
			if d >= 0 {
				st.typical = decayMin(o.typical, us)
			}
			st.clean = min(o.clean+1, maxFig)
		}
		if slow {
			st.clean = 0
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

// kindOf is m's kind when the pipeline keeps a record (PipelineShort), else 0: the
// hash is not worth taking for nothing.
func (p *pipeline) kindOf(m *codec.Message) callKind {
	if p == nil || p.calls == nil {
		return 0
	}
	return kindOf(m)
}

// recordReply books a reply to a call of kind k that took d (in PipelineShort mode;
// nothing otherwise), less the router's own recent wait for a CPU (backendShare):
// slow when over the slow limit. An event stream counts as slow whatever its head's
// time: it may run on for any length, and a pipelined connection takes nothing behind
// it meanwhile.
func (p *pipeline) recordReply(k callKind, d time.Duration, stream bool) {
	if p == nil || p.calls == nil {
		return
	}
	if stream {
		p.calls.record(k, noTime, true)
		return
	}
	d = backendShare(d)
	p.calls.record(k, d, d > p.slow)
}

// recordLate books a call of kind k that failed or was given up after d: as a slow
// call of that long when d is past the bound (the call would have taken longer
// still), not at all otherwise (how long it would have taken is unknown, and a client
// that gives up at once says nothing of the kind).
func (p *pipeline) recordLate(k callKind, d time.Duration) {
	if p == nil || p.calls == nil || d.Microseconds() <= p.bound {
		return
	}
	p.calls.record(k, d, true)
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
