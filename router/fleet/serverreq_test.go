package fleet

import (
	"strconv"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/router"
	"github.com/mcprouter/mcprouter/transport/upstream"
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

// TestServerRequestAnsweredByRouter covers what the router answers itself of a
// backend's requests: a ping, and a request it has no client to route to (the test
// session has no transport; the routing to a client is covered end to end).
func TestServerRequestAnsweredByRouter(t *testing.T) {
	fc := newFleetClient(t, time.Minute)
	fc.send(`{"jsonrpc":"2.0","id":"c","method":"tools/call","params":{"name":"a__echo"}}`)
	call := fc.upstream()
	related := fc.up.sink.(upstream.RelatedSink)
	for _, tc := range []struct {
		req  string
		kind codec.Kind
		code int
	}{
		{`{"jsonrpc":"2.0","id":"b1","method":"ping"}`, codec.KindResult, 0},
		{`{"jsonrpc":"2.0","id":"b1","method":"sampling/createMessage","params":{}}`, codec.KindError, codec.CodeInternalError},
	} {
		related.Related(call.ID, []byte(tc.req))
		back := fc.upstream()
		if back.Kind != tc.kind || string(back.ID) != `"b1"` {
			t.Fatalf("%s: backend got kind %v id %s, want kind %v for \"b1\"", tc.req, back.Kind, back.ID, tc.kind)
		}
		if tc.code != 0 {
			if err := rpcErrorOf(back.Error).(*router.Error); err.Code != tc.code {
				t.Fatalf("%s: code %d, want %d", tc.req, err.Code, tc.code)
			}
		}
	}
	fc.f.srv.mu.Lock()
	n := len(fc.f.srv.m)
	fc.f.srv.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d backend requests pending, want none", n)
	}
	fc.answer(call.ID, `{}`)
	if r := fc.read(); string(r.ID) != `"c"` {
		t.Fatalf("client got %s, want the answer to \"c\"", r.ID)
	}
}
