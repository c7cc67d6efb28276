package router

import (
	"context"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/mcprouter/mcprouter/transport"
	"github.com/mcprouter/mcprouter/transport/budget"
)

func initializeWith(caps, info string) string {
	return `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":` + caps + `,"clientInfo":` + info + `}}`
}

func (h *httpHarness) initializeBody(body string) string {
	h.t.Helper()
	resp, out := h.post("", "", body)
	sid := resp.Header.Get(transport.HeaderSessionID)
	if resp.StatusCode != 200 || sid == "" {
		h.t.Fatalf("initialize: %d session %q: %.300s", resp.StatusCode, sid, out)
	}
	return sid
}

// bigObject is a JSON object of about n bytes.
func bigObject(n int) string { return `{"x":"` + strings.Repeat("a", n-8) + `"}` }

// bigInfo is a clientInfo (an Implementation: name and version, as the schema requires)
// of n bytes.
func bigInfo(n int) string {
	const head = `{"name":"t","version":"1","x":"`
	return head + strings.Repeat("a", n-len(head)-2) + `"}`
}

// TestClientFieldCaps: capabilities or clientInfo beyond 64 KiB are refused with
// -32602 naming the field and the limit (HTTP 200 with the error, like every invalid
// params), and no session opens; both at the limit are accepted and kept in one
// allocation, charged to the session's budget share.
func TestClientFieldCaps(t *testing.T) {
	r := newTestRouter(t, nil)
	b := budget.New(1<<30, 1<<20)
	h := newHTTPHarnessWith(t, r, transport.RegistryConfig{Budget: b}, transport.HTTPConfig{})
	info := `{"name":"t","version":"1"}`
	for _, c := range []struct{ name, body string }{
		{"capabilities", initializeWith(bigObject(MaxClientField+1), info)},
		{"clientInfo", initializeWith(`{}`, bigInfo(2*MaxClientField))},
	} {
		resp, body := h.post("", "", c.body)
		if resp.StatusCode != 200 || resp.Header.Get(transport.HeaderSessionID) != "" ||
			!strings.Contains(body, `"code":-32602`) || !strings.Contains(body, c.name+" is ") || !strings.Contains(body, "64 KiB") {
			t.Errorf("oversized %s: %d session %q %.200s", c.name, resp.StatusCode, resp.Header.Get(transport.HeaderSessionID), body)
		}
	}
	if n := h.reg.Len(); n != 0 {
		t.Fatalf("%d sessions opened by refused initializes", n)
	}

	sid := h.initializeBody(initializeWith(bigObject(MaxClientField), bigInfo(MaxClientField)))
	ts, _ := h.reg.Get([]byte(sid))
	s := sessionOf(ts)
	kc, ki := s.ClientCapabilities(), s.ClientInfo()
	if len(kc) != MaxClientField || len(ki) != MaxClientField || cap(kc) != len(kc) ||
		unsafe.Add(unsafe.Pointer(unsafe.SliceData(kc)), len(kc)) != unsafe.Pointer(unsafe.SliceData(ki)) {
		t.Errorf("capabilities and clientInfo not kept once, side by side: %d/%d bytes", len(kc), len(ki))
	}
	if used := ts.Account().Used(); used < 2*MaxClientField {
		t.Errorf("session record charged %d bytes to the budget, want at least %d", used, 2*MaxClientField)
	}
}

// TestInitializedMarksReady: notifications/initialized tells the transport the
// handshake is done (the session leaves the handshake timeout's reach).
func TestInitializedMarksReady(t *testing.T) {
	r := newTestRouter(t, nil)
	h := newHTTPHarness(t, r, 0)
	sid := h.initialize(V20250618)
	ts, _ := h.reg.Get([]byte(sid))
	if ts.Ready() {
		t.Fatal("ready before notifications/initialized")
	}
	h.post(sid, V20250618, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	eventually(t, "notifications/initialized did not mark the session ready", ts.Ready)
}

// memStore is a SessionStore in memory.
type memStore struct {
	mu sync.Mutex
	m  map[string][]byte
}

func (s *memStore) Save(id string, rec []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[id] = rec
	return nil
}

func (s *memStore) Load(id string) ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.m[id]
	return b, ok
}

func (s *memStore) Delete(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, id)
}

func (s *memStore) has(id string) bool {
	_, ok := s.Load(id)
	return ok
}

// TestAdoptedRecordCharged: a session carried on from another instance's record is
// charged to its budget share like one opened here, and its record is deleted when the
// session ends for its client.
func TestAdoptedRecordCharged(t *testing.T) {
	store := &memStore{m: map[string][]byte{
		"0123456789abcdef0123456789abcdef": []byte(`{"v":"2025-06-18","caps":` + bigObject(8<<10) + `,"info":{"name":"t","version":"1"}}`),
	}}
	r, err := New(Config{Name: "mcprouter", Version: "test", Store: store})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(context.Background()) })
	b := budget.New(1<<30, 1<<20)
	h := newHTTPHarnessWith(t, r, transport.RegistryConfig{Budget: b}, transport.HTTPConfig{Resolver: r})
	const sid = "0123456789abcdef0123456789abcdef"
	if _, body := h.post(sid, V20250618, `{"jsonrpc":"2.0","id":1,"method":"ping"}`); !strings.Contains(body, `"result":{}`) {
		t.Fatalf("ping on a session known to the store: %s", body)
	}
	ts, ok := h.reg.Get([]byte(sid))
	if !ok {
		t.Fatal("session not adopted")
	}
	if used := ts.Account().Used(); used < 8<<10 {
		t.Errorf("adopted session's record charged %d bytes, want at least %d", used, 8<<10)
	}
	ts.Close()
	eventually(t, "record not deleted when the session ended", func() bool { return !store.has(sid) })
	if b.Used() != 0 {
		t.Errorf("budget %d after the session ended, want 0", b.Used())
	}
}
