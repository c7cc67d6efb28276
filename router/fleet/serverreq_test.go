package fleet

import (
	"context"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/router"
	"github.com/mcprouter/mcprouter/transport/upstream"
)

// recordConn is an upstream.Conn that records what the router sends the backend.
type recordConn struct {
	sent chan []byte
	done chan struct{}
}

func newRecordConn() *recordConn {
	return &recordConn{sent: make(chan []byte, 16), done: make(chan struct{})}
}

func (c *recordConn) Send(ctx context.Context, msg []byte) error {
	c.sent <- append([]byte(nil), msg...)
	return nil
}
func (c *recordConn) SetProtocolVersion(string) {}
func (c *recordConn) Done() <-chan struct{}     { return c.done }
func (c *recordConn) Err() error                { return nil }
func (c *recordConn) Close() error              { return nil }

// next returns the next message the backend got, scanned.
func (c *recordConn) next(t *testing.T) codec.Message {
	t.Helper()
	select {
	case msg := <-c.sent:
		var m codec.Message
		if err := codec.Scan(msg, &m); err != nil {
			t.Fatalf("backend got %q: %v", msg, err)
		}
		return m
	case <-time.After(time.Minute):
		t.Fatal("the backend got nothing")
	}
	return codec.Message{}
}

// testServerRequests is a serverRequests part on its own, with a cap of max requests per
// session, and an upstream session to a backend whose requests wait d for an answer.
func testServerRequests(t *testing.T, max int, d time.Duration) (*serverRequests, *upConn, *recordConn) {
	life := newLifecycle()
	t.Cleanup(life.stop)
	s := newServerRequests(life, newTable(), slog.New(slog.DiscardHandler), &Stats{}, max, 0)
	rc := newRecordConn()
	b := &backend{cfg: BackendConfig{Name: "b", Timeout: d}}
	return s, &upConn{b: b, inst: &instance{b: b}, conn: rc}, rc
}

// backendRequestMsg is a backend's request with id n, scanned.
func backendRequestMsg(t *testing.T, n int) ([]byte, *codec.Message) {
	msg := []byte(`{"jsonrpc":"2.0","id":` + strconv.Itoa(n) + `,"method":"roots/list"}`)
	m := new(codec.Message)
	if err := codec.Scan(msg, m); err != nil {
		t.Fatal(err)
	}
	return msg, m
}

// TestServerRequestsBook checks the book of backends' requests waiting for clients: the
// per-session cap, answers only from the session asked, the deadline, and the removal
// of a session's requests when it ends, leaving nothing behind.
func TestServerRequestsBook(t *testing.T) {
	s, conn, _ := testServerRequests(t, 2, time.Hour)
	_, fast, fastBackend := testServerRequests(t, 2, time.Nanosecond)
	a, b := new(router.Session), new(router.Session)
	n := 0
	put := func(sess *router.Session, c *upConn) (*serverRequest, bool) {
		n++
		sr := &serverRequest{sess: sess, conn: c, method: "roots/list", backendID: []byte(strconv.Itoa(n))}
		return sr, s.put(sr)
	}
	a1, ok1 := put(a, conn)
	a2, ok2 := put(a, conn)
	if _, ok := put(a, conn); !ok1 || !ok2 || ok {
		t.Fatalf("put for one session: %v %v %v, want the third refused at the cap of 2", ok1, ok2, ok)
	}
	b1, _ := put(b, conn)
	if s.take(a1.id, b) != nil {
		t.Fatal("a session answered a request sent to another one")
	}
	if s.take(a1.id, a) != a1 || s.take(a1.id, a) != nil {
		t.Fatal("an answer was not taken exactly once")
	}
	if _, ok := put(a, fast); !ok {
		t.Fatal("the answered request still counts against the cap")
	}
	if m := fastBackend.next(t); m.Kind != codec.KindError || string(m.ID) != "5" {
		t.Fatalf("a request past its deadline: backend got kind %v id %s, want an error for 5", m.Kind, m.ID)
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

// TestServerRequestsEnd checks each way a backend's request ends without a client's
// answer, as the backend sees it: expired (client timeout, counted), its
// session ended (client gone, counted), refused at the session's cap, cancelled by the
// backend itself (no answer, nothing left behind). A client's answer travels through
// an exchange: TestServerRequestAnsweredByRouter and the end-to-end tests cover it.
func TestServerRequestsEnd(t *testing.T) {
	s, conn, rc := testServerRequests(t, 1, time.Hour)
	sess := new(router.Session)
	put := func(n int) *serverRequest {
		sr := &serverRequest{sess: sess, conn: conn, method: "roots/list", backendID: []byte(strconv.Itoa(n))}
		if !s.put(sr) {
			t.Fatalf("request %d refused", n)
		}
		return sr
	}
	code := func(m codec.Message) int {
		if m.Kind != codec.KindError {
			t.Fatalf("backend got kind %v, want an error", m.Kind)
		}
		return rpcErrorOf(m.Error).(*router.Error).Code
	}

	sr := put(1)
	s.expire(sr.id)
	if m := rc.next(t); code(m) != codec.CodeClientTimeout || string(m.ID) != "1" {
		t.Fatalf("expired: id %s code %d, want 1 and %d", m.ID, code(m), codec.CodeClientTimeout)
	}
	s.expire(sr.id) // once only
	if n := s.stats.ServerRequestsExpired.Load(); n != 1 {
		t.Fatalf("%d expired, want 1", n)
	}

	put(2)
	s.dropSession(sess)
	if m := rc.next(t); code(m) != codec.CodeClientGone || string(m.ID) != "2" {
		t.Fatalf("dropped: id %s code %d, want 2 and %d", m.ID, code(m), codec.CodeClientGone)
	}
	if n := s.stats.ServerRequestsDropped.Load(); n != 1 {
		t.Fatalf("%d dropped, want 1", n)
	}

	put(3)
	msg, m := backendRequestMsg(t, 4)
	s.fromBackend(conn, msg, m, nil) // no client to route to: refused
	if m := rc.next(t); code(m) != codec.CodeInternalError || string(m.ID) != "4" {
		t.Fatalf("unroutable: id %s code %d, want 4 and %d", m.ID, code(m), codec.CodeInternalError)
	}
	cancel := []byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3}}`)
	var cm codec.Message
	if err := codec.Scan(cancel, &cm); err != nil {
		t.Fatal(err)
	}
	s.cancelled(conn, cancel, &cm)
	if len(s.m) != 0 || len(s.byBackend) != 0 {
		t.Fatalf("a request its backend cancelled is still pending")
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
