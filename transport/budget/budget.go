// Package budget accounts the bytes the router retains for its clients (resumption rings,
// retained reply streams, queued messages, session records) against one global budget,
// with a share per session, so that one client cannot exhaust the process's memory.
//
// The accounting is two atomic counters per insert (the session's and the global one):
// cheap enough for the hot path of every published event. A nil *Budget or *Account
// accounts nothing and refuses nothing, so code paths need no "budgets off" branch.
package budget

import (
	"errors"
	"sync/atomic"
)

// ErrOverBudget: the bytes do not fit in the session's share or in the global budget,
// even after the session's oldest retained data was given back.
var ErrOverBudget = errors.New("budget: over the session's memory share")

// Budget is the global byte budget: every session's Account draws on it.
type Budget struct {
	limit int64
	share int64
	used  atomic.Int64
	// Refused counts reservations refused after reclaiming (sessions told they are over).
	Refused atomic.Uint64
}

// New returns a budget of limit bytes in total, of which one session may hold at most
// share. limit <= 0 returns nil: no budget (nothing accounted, nothing refused).
func New(limit, share int64) *Budget {
	if limit <= 0 {
		return nil
	}
	if share <= 0 || share > limit {
		share = limit
	}
	return &Budget{limit: limit, share: share}
}

// Used is the bytes currently held by every account: a gauge for metrics.
func (b *Budget) Used() int64 {
	if b == nil {
		return 0
	}
	return b.used.Load()
}

// Limit is the global budget in bytes (0 for a nil budget).
func (b *Budget) Limit() int64 {
	if b == nil {
		return 0
	}
	return b.limit
}

// Share is the most one session may hold (0 for a nil budget).
func (b *Budget) Share() int64 {
	if b == nil {
		return 0
	}
	return b.share
}

// Account returns a new account, for one session, drawing on b; nil when b is nil.
func (b *Budget) Account() *Account {
	if b == nil {
		return nil
	}
	return &Account{b: b}
}

// Account is one session's part of a Budget. Its methods are safe for concurrent use,
// SetReclaim excepted.
type Account struct {
	b       *Budget
	used    atomic.Int64
	reclaim Reclaimer // set by SetReclaim; nil: none
}

// A Reclaimer gives back a session's oldest retained data, at least need bytes if it
// can, and reports whether it freed anything. It is called without any lock of the
// caller held.
type Reclaimer interface {
	Reclaim(need int64) bool
}

// SetReclaim installs what frees the session's oldest retained data when a
// reservation does not fit (see Reserve). Call it before the account is shared (before
// its first reservation): it is set once, unsynchronized, so that a session's account
// holds its session's streams as they are (a pointer), where a function and a pointer
// to it took 24 bytes more of every session.
func (a *Account) SetReclaim(r Reclaimer) {
	if a != nil {
		a.reclaim = r
	}
}

// Share is the most the account may hold (0 for a nil account): a reservation larger
// than it is refused whatever the session gives back.
func (a *Account) Share() int64 {
	if a == nil {
		return 0
	}
	return a.b.share
}

// Used is the bytes the account holds.
func (a *Account) Used() int64 {
	if a == nil {
		return 0
	}
	return max(a.used.Load(), 0)
}

// TryReserve takes n bytes if they fit both in the session's share and in the global
// budget, and reports whether it did. It never reclaims. A closed account takes nothing.
func (a *Account) TryReserve(n int64) bool {
	if a == nil || n <= 0 {
		return true
	}
	for {
		u := a.used.Load()
		if u < 0 || u+n > a.b.share {
			return false
		}
		if a.used.CompareAndSwap(u, u+n) {
			break
		}
	}
	if a.b.used.Add(n) > a.b.limit {
		a.b.used.Add(-n)
		a.undo(n)
		return false
	}
	return true
}

// undo takes back n bytes the account counted but the global budget refused. If Close
// came in between, it gave those n back to the global budget too: they are put back.
func (a *Account) undo(n int64) {
	for {
		u := a.used.Load()
		if u < 0 {
			a.b.used.Add(n)
			return
		}
		if a.used.CompareAndSwap(u, u-n) {
			return
		}
	}
}

// Reserve takes n bytes, first asking the session to give back its oldest retained
// data (its Reclaimer) while they do not fit. It fails with ErrOverBudget when
// they still do not: the caller then frees what it holds itself, or refuses.
func (a *Account) Reserve(n int64) error {
	if a != nil && n > a.Share() {
		a.b.Refused.Add(1)
		return ErrOverBudget // nothing the session gives back makes it fit
	}
	for !a.TryReserve(n) {
		if a.reclaim == nil || !a.reclaim.Reclaim(a.need(n)) {
			a.b.Refused.Add(1)
			return ErrOverBudget
		}
	}
	return nil
}

// need is how much must be freed for n more bytes to fit the session's share.
func (a *Account) need(n int64) int64 {
	return max(a.Used()+n-a.b.share, a.b.used.Load()+n-a.b.limit, 1)
}

// Add takes n bytes without checking the share: a small correction to a reservation
// already made (n may be negative). A closed account takes nothing.
func (a *Account) Add(n int64) {
	if a == nil || n == 0 {
		return
	}
	if n < 0 {
		a.Release(-n)
		return
	}
	for {
		u := a.used.Load()
		if u < 0 {
			return
		}
		if a.used.CompareAndSwap(u, u+n) {
			a.b.used.Add(n)
			return
		}
	}
}

// Release gives back n bytes. Bytes released after Close were given back already.
func (a *Account) Release(n int64) {
	if a == nil || n <= 0 {
		return
	}
	for {
		u := a.used.Load()
		if u < 0 {
			return // closed: Close gave everything back
		}
		nu := max(u-n, 0)
		if a.used.CompareAndSwap(u, nu) {
			a.b.used.Add(nu - u)
			return
		}
	}
}

// Close gives back everything the account still holds (the session ended); the account
// takes nothing more, and later releases are no-ops.
func (a *Account) Close() {
	if a == nil {
		return
	}
	if n := a.used.Swap(closed); n > 0 {
		a.b.used.Add(-n)
	}
}

// closed marks a closed account's counter.
const closed = -1
