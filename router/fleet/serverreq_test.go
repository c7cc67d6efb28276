package fleet

import (
	"strconv"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/router"
)

func newServerRequests() *serverRequests {
	return &serverRequests{m: map[uint64]*serverRequest{}, bySess: map[*router.Session]map[uint64]*serverRequest{},
		byBackend: map[backendKey]*serverRequest{}}
}

// TestServerRequestsBook checks the book of backends' requests waiting for clients: the
// per-session cap, answers only from the session asked, the deadline, and the removal
// of a session's requests when it ends, leaving nothing behind.
func TestServerRequestsBook(t *testing.T) {
	s := newServerRequests()
	a, b := new(router.Session), new(router.Session)
	expired := make(chan uint64, 4)
	expire := func(id uint64) {
		if s.take(id, nil) != nil {
			expired <- id
		}
	}
	conn, n := new(upConn), 0
	put := func(sess *router.Session, d time.Duration) (*serverRequest, bool) {
		n++
		sr := &serverRequest{sess: sess, conn: conn, backendID: []byte(strconv.Itoa(n))}
		return sr, s.put(sr, 2, d, expire)
	}
	a1, ok1 := put(a, time.Hour)
	a2, ok2 := put(a, time.Hour)
	if _, ok := put(a, time.Hour); !ok1 || !ok2 || ok {
		t.Fatalf("put for one session: %v %v %v, want the third refused at the cap of 2", ok1, ok2, ok)
	}
	b1, _ := put(b, time.Hour)
	if s.take(a1.id, b) != nil {
		t.Fatal("a session answered a request sent to another one")
	}
	if s.take(a1.id, a) != a1 || s.take(a1.id, a) != nil {
		t.Fatal("an answer was not taken exactly once")
	}
	if _, ok := put(a, time.Nanosecond); !ok {
		t.Fatal("the answered request still counts against the cap")
	}
	select {
	case <-expired:
	case <-time.After(time.Minute):
		t.Fatal("a request past its deadline did not expire")
	}
	if got := s.takeSession(a); len(got) != 1 || got[0] != a2 {
		t.Fatalf("takeSession = %v, want the one pending request of the session", got)
	}
	if got := s.byBackend[b1.backendKey()]; got != b1 {
		t.Fatalf("by its backend id: %p, want %p", got, b1)
	}
	if s.take(b1.id, b) != b1 || len(s.m) != 0 || len(s.bySess) != 0 || len(s.byBackend) != 0 {
		t.Fatalf("left behind: %d requests, %d sessions, %d backend ids", len(s.m), len(s.bySess), len(s.byBackend))
	}
}
