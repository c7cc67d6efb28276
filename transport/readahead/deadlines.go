package readahead

import (
	"errors"
	"math"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Deadlines keeps a connection's read and write deadlines and hands each to the
// runtime only when an operation is about to wait for the socket, or when one is
// already waiting.
//
// Why: fasthttp sets a deadline before nearly every step of an exchange (the idle
// wait, the request's headers, its body, the response; on the client side the
// request and the reply), and each costs a clock read and a change to a runtime
// timer under its lock. Most of those steps never wait: the request is in the socket
// already, the response fits in the socket's buffer. Kept here, a deadline costs a
// store until some operation has to wait, and the deadline in force is then the last
// one set, as with net.Conn.
//
// A wait (BeforeWait, BeforeWaitUntil) keeps the deadline the runtime has when the
// one it should have is at most lazySlack later: on a keep-alive connection the next
// wait's deadline is the last one moved on by the time between two requests, and
// handing each over is a runtime timer change under its lock, twice per forwarded
// call. The runtime's deadline then comes first, up to lazySlack early; the wait's
// caller sees a timeout that Stale tells apart, and Stale hands the exact deadline
// over for it to try again. So a wait never ends later than its deadline, and ends
// early only as a wake-up that Stale absorbs.
//
// Operations that wait through the runtime by themselves (a plain Read or Write on
// the connection, or a syscall.RawConn handed out) must call Apply first, which hands
// over the exact deadline. A deadline already handed over that has passed makes the
// runtime refuse an operation before it tries (a timeout) even though a later deadline
// is wanted: Stale tells the caller to try again then. Deadlines' methods are safe for
// concurrent use.
//
// The deadlines are kept as Unix nanoseconds (deadline), 8 bytes each where a
// time.Time takes 24: every connection of the router keeps six of them, idle ones too.
//
// Setting a deadline while no operation waits takes no lock (want and waiting are
// atomic): fasthttp sets four per request on the listener's connections and two per
// exchange on the backend's, and the lock was half of each (BenchmarkSetDeadlineKept).
// A setter stores want and then reads waiting; a wait sets waiting and then, under mu,
// reads want: one of the two sees the other's write, so a deadline set while an
// operation starts to wait reaches the runtime either way.
type Deadlines struct {
	c       net.Conn
	mu      sync.Mutex
	waiting [2]atomic.Bool  // an operation is waiting, or about to; set and cleared under mu
	want    [2]atomic.Int64 // a deadline, by Read, Write
	set     [2]deadline     // what the runtime has
	bound   [2]deadline     // an earlier end for the current wait (BeforeWaitUntil); none: no bound
}

// deadline is a deadline in Unix nanoseconds; none (0) is no deadline, the zero
// time.Time.
//
// A time.Time's monotonic reading is not kept: the runtime measures a deadline
// against the clock it reads when it is handed over, and a deadline is an absolute
// time (net.Conn's). A deadline set from time.Now, handed to the runtime later, moves
// only if the wall clock is stepped in between.
type deadline int64

const none deadline = 0

// deadlineOf is t as a deadline. The instant of none itself (the Unix epoch) is kept a
// nanosecond earlier, as passed as it; times beyond what 64 bits of nanoseconds count
// (before 1678, after 2262) are kept at its ends, passed or never reached alike.
func deadlineOf(t time.Time) deadline {
	if s := t.Unix(); s > minDeadlineSec && s < maxDeadlineSec { // the common case, in range
		if d := deadline(t.UnixNano()); d != none {
			return d
		}
		return none - 1
	}
	switch {
	case t.IsZero():
		return none
	case t.Before(minDeadline):
		return math.MinInt64
	case t.After(maxDeadline):
		return math.MaxInt64
	}
	if d := deadline(t.UnixNano()); d != none {
		return d
	}
	return none - 1
}

// The range of time a deadline counts, and the seconds strictly inside it.
var (
	minDeadline, maxDeadline       = time.Unix(0, math.MinInt64), time.Unix(0, math.MaxInt64)
	minDeadlineSec, maxDeadlineSec = minDeadline.Unix(), maxDeadline.Unix()
)

// asTime is d as net.Conn takes it: the zero time.Time for none.
func (d deadline) asTime() time.Time {
	if d == none {
		return time.Time{}
	}
	return time.Unix(0, int64(d))
}

// Read and Write name the deadline an operation concerns.
const (
	Read  = 0
	Write = 1
)

// Init makes d the deadlines of c, none set yet: c's must be none either.
func (d *Deadlines) Init(c net.Conn) { d.c = c }

// SetDeadline implements net.Conn.
func (d *Deadlines) SetDeadline(t time.Time) error {
	if err := d.store(Read, t); err != nil {
		return err
	}
	return d.store(Write, t)
}

// SetReadDeadline implements net.Conn.
func (d *Deadlines) SetReadDeadline(t time.Time) error { return d.store(Read, t) }

// SetWriteDeadline implements net.Conn.
func (d *Deadlines) SetWriteDeadline(t time.Time) error { return d.store(Write, t) }

// store keeps t as the deadline k, handing it to the runtime when an operation waits
// (see Deadlines for why no lock is taken otherwise).
func (d *Deadlines) store(k int, t time.Time) error {
	d.want[k].Store(int64(deadlineOf(t)))
	if !d.waiting[k].Load() {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.waiting[k].Load() {
		return d.applyLocked(k)
	}
	return nil
}

// BeforeWait hands the deadline k to the runtime for an operation about to wait; Woke
// must follow when the operation returns.
func (d *Deadlines) BeforeWait(k int) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.waiting[k].Store(true)
	return d.handOverLocked(k, true)
}

// BeforeWaitUntil is BeforeWait for a wait that must also end at bound, if that comes
// before the deadline: the runtime then reports the deadline passed, and Stale (after
// Woke) tells the caller to try again under the real one. The bound covers this wait
// only.
func (d *Deadlines) BeforeWaitUntil(k int, bound time.Time) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.waiting[k].Store(true)
	d.bound[k] = deadlineOf(bound)
	return d.handOverLocked(k, true)
}

// Woke ends what BeforeWait or BeforeWaitUntil began.
func (d *Deadlines) Woke(k int) {
	d.mu.Lock()
	d.waiting[k].Store(false)
	d.bound[k] = none
	d.mu.Unlock()
}

// Apply hands the deadline k to the runtime now.
func (d *Deadlines) Apply(k int) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.applyLocked(k)
}

// Stale reports whether err, an operation's timeout, came from a deadline the runtime
// had but that is no longer the one wanted: the wanted one is handed over and the
// caller tries again.
func (d *Deadlines) Stale(k int, err error) bool {
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.target(k) == d.set[k] {
		return false
	}
	return d.applyLocked(k) == nil
}

// target is the deadline the runtime should have for k: the one wanted, or the current
// wait's bound if that comes first.
func (d *Deadlines) target(k int) deadline {
	t, b := deadline(d.want[k].Load()), d.bound[k]
	if b != none && (t == none || b < t) {
		return b
	}
	return t
}

// lazySlack is how much earlier than the one it should have the runtime's deadline may
// stay for a wait (see Deadlines). It is far below any timeout fasthttp or a backend's
// configuration sets, and below heldWaitBound, so that a wait's kept deadline has not
// passed when the wait starts: 20 ms, against requests a few milliseconds apart on a
// busy connection.
const lazySlack = 20 * time.Millisecond

func (d *Deadlines) applyLocked(k int) error { return d.handOverLocked(k, false) }

// handOverLocked gives the runtime the deadline k should have; lazy keeps the one it
// has when that is at most lazySlack earlier (a wait's, which Stale covers).
func (d *Deadlines) handOverLocked(k int, lazy bool) error {
	t, s := d.target(k), d.set[k]
	if t == s || lazy && s != none && t != none && t >= s && uint64(t-s) <= uint64(lazySlack) {
		return nil
	}
	var err error
	if k == Read {
		err = d.c.SetReadDeadline(t.asTime())
	} else {
		err = d.c.SetWriteDeadline(t.asTime())
	}
	if err == nil {
		d.set[k] = t
	}
	return err
}
