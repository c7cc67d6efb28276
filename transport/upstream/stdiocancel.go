package upstream

import (
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/mcprouter/mcprouter/codec"
)

// unanswered is the requests written to one child that it has not answered, by their
// raw ids, so that stopping the child cancels them first.
//
// Why: a child that gets the end of its stdin may finish the calls it has before it
// exits (the reference backend waits for their replies up to 30 s; a Node server lives
// while a call's timer does). The router that closes the Instance no longer wants
// them, and without a word the child held Close for StopTimeout, until SIGTERM. With a
// notifications/cancelled for each of them written before stdin closes, it stops them
// and exits at once: as HTTPConn's Close stops its calls' streams before its DELETE.
//
// The router's ids are integers, kept without allocating; other ids as strings. At most
// maxUnanswered are kept: a request beyond it is not cancelled at Close, and the
// escalation still bounds the stop.
type unanswered struct {
	n    atomic.Int32 // len(nums)+len(strs), read without the lock on the read path
	mu   sync.Mutex
	nums map[uint64]struct{}
	strs map[string]struct{}
}

// maxUnanswered bounds the ids an unanswered keeps.
const maxUnanswered = 1 << 14

// sent books msg, a message written (or queued) for the child: a request's id is
// added, a notifications/cancelled's request removed (it may get no answer). It reports
// the request's id added (nil for none), for undo when the message could not be queued.
func (u *unanswered) sent(m *codec.Message) []byte {
	switch {
	case m.Kind == codec.KindRequest && u.add(m.ID):
		return m.ID
	case m.Kind == codec.KindNotification && isMethod(m, "notifications/cancelled") && m.RequestID != nil:
		u.remove(m.RequestID)
	}
	return nil
}

// answered books msg, a message from the child: the request it answers, if any, is no
// longer outstanding.
func (u *unanswered) answered(msg []byte) {
	if u.n.Load() == 0 {
		return
	}
	if id := peekResponseID(msg); id != nil {
		u.remove(id)
	}
}

// add keeps id; false when it is full.
func (u *unanswered) add(id []byte) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.n.Load() >= maxUnanswered {
		return false
	}
	if n, ok := codec.ParseUintID(id); ok {
		if u.nums == nil {
			u.nums = make(map[uint64]struct{})
		}
		u.nums[n] = struct{}{}
	} else {
		if u.strs == nil {
			u.strs = make(map[string]struct{})
		}
		u.strs[string(id)] = struct{}{}
	}
	u.n.Store(int32(len(u.nums) + len(u.strs)))
	return true
}

func (u *unanswered) remove(id []byte) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if n, ok := codec.ParseUintID(id); ok {
		delete(u.nums, n)
	} else {
		delete(u.strs, string(id))
	}
	u.n.Store(int32(len(u.nums) + len(u.strs)))
}

// cancelReason is the reason the cancellations written at Close give.
const cancelReason = `"the router closed its connection to this server"`

// appendCancels appends a notifications/cancelled line for every request kept.
func (u *unanswered) appendCancels(dst []byte) []byte {
	u.mu.Lock()
	defer u.mu.Unlock()
	var idBuf [20]byte
	for n := range u.nums {
		dst = appendCancel(dst, strconv.AppendUint(idBuf[:0], n, 10))
	}
	for id := range u.strs {
		dst = appendCancel(dst, []byte(id))
	}
	return dst
}

// appendCancel appends the notifications/cancelled line of the request id.
func appendCancel(dst, id []byte) []byte {
	var params [64]byte
	p := append(append(append(params[:0], `{"requestId":`...), id...), `,"reason":`+cancelReason+`}`...)
	return append(codec.AppendNotification(dst, "notifications/cancelled", p), '\n')
}
