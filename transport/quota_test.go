package transport

import (
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/transport/budget"
	"github.com/mcprouter/mcprouter/transport/sse"
)

// initializeFrom opens a session from the client address ip, and returns its id ("" when
// refused) with the response.
func (ts *testServer) initializeFrom(ip string) (string, *http.Response) {
	ts.t.Helper()
	resp := ts.do(req{from: ip, body: `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}`})
	return resp.Header.Get(HeaderSessionID), resp
}

func (ts *testServer) alive(sid string) bool {
	s, ok := ts.Reg.Get([]byte(sid))
	return ok && !s.Closed()
}

// TestClientQuota: a client address that fills its quota, in a bounded loop, only ever
// replaces its own idle sessions; another address still opens sessions, and the first
// one's sessions never outnumber the quota. When all of an address's sessions are busy,
// its next one is refused with ErrClientQuota.
func TestClientQuota(t *testing.T) {
	const quota = 3
	ts := newTestServer(t, serverOpts{reg: RegistryConfig{MaxSessions: 100, MaxPerClient: quota}, cfg: HTTPConfig{InitRate: -1}})
	victim, _ := ts.initializeFrom("127.0.0.1")
	var attacker []string
	for i := 0; i < 20; i++ {
		sid, resp := ts.initializeFrom("127.0.0.2")
		if sid == "" {
			t.Fatalf("attacker's initialize %d refused: %d %s; its own idle sessions should make room", i, resp.StatusCode, bodyOf(resp))
		}
		attacker = append(attacker, sid)
	}
	live := 0
	for _, sid := range attacker {
		if ts.alive(sid) {
			live++
		}
	}
	if live != quota {
		t.Errorf("attacker holds %d sessions, want its quota %d", live, quota)
	}
	for _, sid := range attacker[len(attacker)-quota:] {
		if !ts.alive(sid) {
			t.Errorf("one of the attacker's newest sessions was evicted; the oldest go first")
		}
	}
	if !ts.alive(victim) {
		t.Errorf("another address's session was evicted by the attacker")
	}
	if sid, resp := ts.initializeFrom("127.0.0.1"); sid == "" {
		t.Fatalf("the other address cannot open a session: %d %s", resp.StatusCode, bodyOf(resp))
	}

	// The attacker's sessions all busy: the next is refused, the others still served.
	for _, sid := range attacker[len(attacker)-quota:] {
		get := ts.do(req{method: "GET", headers: sessionHeaders(sid, "2025-06-18")})
		defer get.Body.Close()
	}
	sid, resp := ts.initializeFrom("127.0.0.2")
	if sid != "" || !strings.Contains(bodyOf(resp), "too many sessions from this client address") {
		t.Errorf("initialize past the quota with busy sessions: session %q, %s; want refused", sid, bodyOf(resp))
	}
	ts.h.mu.Lock()
	bindErr := ts.h.bindErr
	ts.h.mu.Unlock()
	if !errors.Is(bindErr, ErrClientQuota) {
		t.Errorf("Bind error %v, want ErrClientQuota", bindErr)
	}
	// A legacy stream opens a session before initialize: the same quota holds.
	legacy := ts.do(req{method: "GET", path: "/sse", from: "127.0.0.2"})
	if legacy.StatusCode != http.StatusServiceUnavailable || !strings.Contains(bodyOf(legacy), "too many sessions from this address") {
		t.Errorf("legacy stream past the quota: %d %s, want 503", legacy.StatusCode, bodyOf(legacy))
	}
	legacy.Body.Close()
	if sid, resp := ts.initializeFrom("127.0.0.1"); sid == "" {
		t.Fatalf("the other address cannot open a session: %d %s", resp.StatusCode, bodyOf(resp))
	}
	if sid, resp := ts.initializeFrom("::1"); sid == "" {
		t.Fatalf("an IPv6 client cannot open a session: %d %s", resp.StatusCode, bodyOf(resp))
	}
}

// TestFullTableEvictsLongestIdle: with the table full, a new session replaces the
// longest-idle one, not a busy one (a call in flight), and the evicted session's
// streams end and its handler is told.
func TestFullTableEvictsLongestIdle(t *testing.T) {
	ts := newTestServer(t, serverOpts{reg: RegistryConfig{MaxSessions: 3}, cfg: HTTPConfig{InitRate: -1}})
	busy := ts.initialize("2025-06-18")
	oldest := ts.initialize("2025-06-18")
	newer := ts.initialize("2025-06-18")
	// busy is the oldest by activity, but has a call in flight.
	go ts.do(req{body: `{"jsonrpc":"2.0","id":2,"method":"hold"}`, headers: sessionHeaders(busy, "2025-06-18")})
	waitFor(t, "the held call", func() bool { return ts.h.holdingCount() == 1 })
	s, _ := ts.Reg.Get([]byte(busy))
	s.lastActive.Store(0) // the longest idle by far, if it were idle
	oldSess, _ := ts.Reg.Get([]byte(oldest))
	oldSess.lastActive.Store(1)

	ts.initialize("2025-06-18")
	select {
	case <-oldSess.Done():
	case <-time.After(waitLimit):
		t.Fatal("the longest-idle session was not evicted")
	}
	if !ts.alive(busy) || !ts.alive(newer) {
		t.Errorf("evicted the wrong session: busy alive %v, newer alive %v", ts.alive(busy), ts.alive(newer))
	}
	if n := ts.Reg.Evicted.Load(); n != 1 {
		t.Errorf("Evicted = %d, want 1", n)
	}
	ts.h.mu.Lock()
	closed := strings.Join(ts.h.closed, ",")
	ts.h.mu.Unlock()
	if !strings.Contains(closed, oldest) {
		t.Errorf("handler not told of the eviction: closed %q", closed)
	}
}

// TestInitTimeout: sessions whose handshake does not finish within InitTimeout end, a
// legacy stream opened and never used included (its stream ends); a session marked
// ready stays.
func TestInitTimeout(t *testing.T) {
	ts := newTestServer(t, serverOpts{reg: RegistryConfig{InitTimeout: 50 * time.Millisecond}})
	ready := ts.initialize("2025-06-18")
	rs, _ := ts.Reg.Get([]byte(ready))
	rs.MarkReady()
	unready := ts.initialize("2025-06-18")
	resp, rd, endpoint := ts.openLegacy()
	defer resp.Body.Close()
	legacyID := endpoint[strings.Index(endpoint, "=")+1:]

	readEvents(t, rd, -1) // the legacy stream ends
	for _, sid := range []string{unready, legacyID} {
		waitFor(t, "session "+sid+" to expire without its handshake", func() bool {
			ts.h.mu.Lock()
			defer ts.h.mu.Unlock()
			return strings.Contains(strings.Join(ts.h.closed, ","), sid)
		})
	}
	if !ts.alive(ready) {
		t.Errorf("a session that finished its handshake expired")
	}
	if n := ts.Reg.Unready.Load(); n != 2 {
		t.Errorf("Unready = %d, want 2", n)
	}
}

// TestInitRateLimit: past its burst, an address's initialize gets 429 with Retry-After
// and the overloaded JSON-RPC error (-32000) with its retryAfterMs, and so does its legacy stream; other
// addresses are not affected.
func TestInitRateLimit(t *testing.T) {
	ts := newTestServer(t, serverOpts{cfg: HTTPConfig{InitRate: 0.001, InitBurst: 2}})
	for i := 0; i < 2; i++ {
		if sid, resp := ts.initializeFrom("127.0.0.2"); sid == "" {
			t.Fatalf("initialize %d within the burst: %d %s", i, resp.StatusCode, bodyOf(resp))
		}
	}
	sid, resp := ts.initializeFrom("127.0.0.2")
	body := bodyOf(resp)
	if sid != "" || resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" ||
		!strings.Contains(body, `"error":{"code":-32000`) || !strings.Contains(body, `"data":{"retryAfterMs":`) {
		t.Errorf("initialize past the rate: %d Retry-After %q %s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	legacy := ts.do(req{method: "GET", path: "/sse", from: "127.0.0.2"})
	if legacy.StatusCode != http.StatusTooManyRequests {
		t.Errorf("legacy stream past the rate: %d, want 429", legacy.StatusCode)
	}
	legacy.Body.Close()
	if sid, resp := ts.initializeFrom("127.0.0.1"); sid == "" {
		t.Errorf("another address is limited too: %d %s", resp.StatusCode, bodyOf(resp))
	}
	if n := ts.HTTP.Stats.RateLimited.Load(); n != 2 {
		t.Errorf("RateLimited = %d, want 2", n)
	}
}

// TestReplyStreamsWithinShare: a session that receives many large streamed replies keeps
// at most MaxPostStreams of them, all its retained streams within its budget share,
// the oldest forgotten first; the newest still resumes.
func TestReplyStreamsWithinShare(t *testing.T) {
	const share = 256 << 10
	b := budget.New(1<<30, share)
	ts := newTestServer(t, serverOpts{reg: RegistryConfig{Budget: b}})
	sid := ts.initialize("2025-06-18")
	sess, _ := ts.Reg.Get([]byte(sid))
	var lastID string
	for i := 0; i < 20; i++ {
		resp := ts.do(req{body: `{"jsonrpc":"2.0","id":2,"method":"progress","params":{"count":1,"size":90000}}`, headers: sessionHeaders(sid, "2025-06-18")})
		evs := readEvents(t, sse.NewReader(resp.Body, 0), -1)
		resp.Body.Close()
		if len(evs) < 2 || !strings.Contains(evs[len(evs)-1].Data, `"sent":1`) {
			t.Fatalf("reply %d: %d events", i, len(evs))
		}
		lastID = evs[len(evs)-1].ID
		if used := sess.Account().Used(); used > share {
			t.Fatalf("after reply %d: session holds %d bytes, over its share %d", i, used, share)
		}
	}
	out := sess.out.(*streamableOut)
	out.mu.Lock()
	kept := len(out.postStreams())
	out.mu.Unlock()
	if kept > DefaultMaxPostStreams {
		t.Errorf("%d reply streams kept, want at most %d", kept, DefaultMaxPostStreams)
	}
	id, _ := sse.ParseEventID([]byte(lastID))
	if st := out.stream(id.Stream); st == nil {
		t.Errorf("the newest reply stream was forgotten")
	}
	if b.Used() != sess.Account().Used() {
		t.Errorf("budget %d, session %d: the only session should hold it all", b.Used(), sess.Account().Used())
	}
	ts.do(req{method: "DELETE", headers: sessionHeaders(sid, "2025-06-18")})
	if b.Used() != 0 {
		t.Errorf("budget %d after the session ended, want 0", b.Used())
	}
}

// TestSessionRecordsPurged: a session that ends for its client has its logged events
// forgotten; one handed over at shutdown keeps them for the instance it moves to.
func TestSessionRecordsPurged(t *testing.T) {
	log := &forgetLog{}
	ts := newTestServer(t, serverOpts{cfg: HTTPConfig{Events: log}})
	gone := ts.initialize("2025-06-18")
	kept := ts.initialize("2025-06-18")
	ts.do(req{method: "DELETE", headers: sessionHeaders(gone, "2025-06-18")})
	ts.HTTP.Shutdown()
	log.mu.Lock()
	defer log.mu.Unlock()
	if strings.Join(log.forgotten, ",") != gone {
		t.Errorf("forgotten %v, want only %s (not the handed-over %s)", log.forgotten, gone, kept)
	}
}

type forgetLog struct {
	mu        sync.Mutex
	forgotten []string
}

func (l *forgetLog) Append(string, uint64, []byte)       {}
func (l *forgetLog) Since(string) ([]LoggedEvent, error) { return nil, nil }
func (l *forgetLog) Forget(id string) {
	l.mu.Lock()
	l.forgotten = append(l.forgotten, id)
	l.mu.Unlock()
}

// TestReplyOverShare: a streamed reply larger than the session's whole share is replaced
// by an error response to the same request that says why; the session goes on.
func TestReplyOverShare(t *testing.T) {
	ts := newTestServer(t, serverOpts{reg: RegistryConfig{Budget: budget.New(1<<30, 64<<10)}})
	sid := ts.initialize("2025-06-18")
	resp := ts.do(req{body: `{"jsonrpc":"2.0","id":7,"method":"echo","params":{"pad":"` + strings.Repeat("x", 100<<10) + `"}}`,
		headers: map[string]string{HeaderSessionID: sid, HeaderProtocolVersion: "2025-06-18", "Accept": "text/event-stream"}})
	evs := readEvents(t, sse.NewReader(resp.Body, 0), -1)
	resp.Body.Close()
	if len(evs) != 1 || !strings.Contains(evs[0].Data, `"id":7,"error":{"code":-32603`) || !strings.Contains(evs[0].Data, "memory share") {
		t.Fatalf("reply over the share: %v", evs)
	}
	if resp := ts.do(req{body: `{"jsonrpc":"2.0","id":8,"method":"ping"}`, headers: sessionHeaders(sid, "2025-06-18")}); !strings.Contains(bodyOf(resp), `"id":8,"result"`) {
		t.Errorf("session after the refused reply: %s", bodyOf(resp))
	}
}
