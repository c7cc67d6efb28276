package router

import (
	"strings"
	"testing"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/internal/testwait"
	"github.com/mcprouter/mcprouter/transport"
)

// runFleet forwards every request to Run, which answers it: the shape of a real
// forward, for counting where Run ran.
type runFleet struct {
	Fleet // unimplemented methods panic: the test must not need them
}

func (f *runFleet) AppendCapabilities(dst []byte, _ string) []byte {
	return append(dst, `,"tools":{}`...)
}
func (f *runFleet) SetLogLevel(*Session, string) {}
func (f *runFleet) SessionOpened(*Session)       {}
func (f *runFleet) SessionClosed(*Session)       {}

func (f *runFleet) Prepare(s *Session, x *transport.Exchange) bool {
	if x.Msg.Kind != codec.KindRequest {
		x.Done()
		return false
	}
	return true
}

func (f *runFleet) Run(s *Session, x *transport.Exchange) {
	x.Reply(codec.AppendResult(nil, x.Msg.ID, []byte(`{"content":[]}`)))
}

// ranInline is how many jobs the router's dispatcher ran on their callers, and how
// many it gave a worker in all.
func ranInline(r *Router) (inline, submitted uint64) {
	for _, s := range r.Dispatcher().Stats().Shards {
		inline += s.RanInline
		submitted += s.Submitted
	}
	return inline, submitted
}

// TestRunOnCaller: with Config.RunOnCaller, a session's lone request on Streamable HTTP
// from a client that declared nothing a backend could ask it is forwarded on the
// request's goroutine; a client that declared sampling, a batch, or a router without
// the option get a pool worker, and every request is answered either way.
func TestRunOnCaller(t *testing.T) {
	newRouter := func(on bool) *Router {
		r, err := New(Config{Name: "mcprouter", Version: "test", Fleet: &runFleet{}, RunOnCaller: on})
		if err != nil {
			t.Fatal(err)
		}
		testwait.Cleanup(t, waitLimit, r.Close)
		return r
	}
	const call = `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"x"}}`
	check := func(h *httpHarness, sid, version, body, want string) {
		t.Helper()
		if _, got := h.post(sid, version, body); !strings.Contains(got, want) {
			t.Fatalf("%s: %s, want %s", body, got, want)
		}
	}

	r := newRouter(true)
	h := newHTTPHarness(t, r, 0)
	quiet := h.initializeBody(initializeWith(`{}`, `{"name":"t","version":"1"}`))
	for range 3 {
		check(h, quiet, V20250618, call, `"id":2,"result":{"content":[]}`)
	}
	if inline, submitted := ranInline(r); inline == 0 || inline > submitted {
		t.Errorf("a quiet client's requests: %d of %d ran on the caller, want some", inline, submitted)
	}

	before, _ := ranInline(r)
	asks := h.initializeBody(initializeWith(`{"sampling":{}}`, `{"name":"t","version":"1"}`))
	check(h, asks, V20250618, call, `"id":2,"result":{"content":[]}`)
	old := h.initializeBody(strings.Replace(initializeWith(`{}`, `{"name":"t","version":"1"}`), "2025-06-18", V20250326, 1))
	check(h, old, V20250326, `[`+call+`,{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"y"}}]`, `"id":3,"result":{"content":[]}`)
	if after, _ := ranInline(r); after != before {
		t.Errorf("a client that can be asked, or a batch, ran %d requests on the caller", after-before)
	}

	off := newRouter(false)
	ho := newHTTPHarness(t, off, 0)
	sid := ho.initializeBody(initializeWith(`{}`, `{"name":"t","version":"1"}`))
	check(ho, sid, V20250618, call, `"id":2,"result":{"content":[]}`)
	if inline, _ := ranInline(off); inline != 0 {
		t.Errorf("without RunOnCaller, %d requests ran on the caller", inline)
	}
}

// TestMayAsk: the capabilities under which a backend may send the client a request.
func TestMayAsk(t *testing.T) {
	for caps, want := range map[string]bool{
		``:                               false,
		`{}`:                             false,
		`{"experimental":{"x":{}}}`:      false,
		`{"roots":{"listChanged":true}}`: true,
		`{"elicitation":{}}`:             true,
		`{"experimental":{},"tasks":{}}`: true,
		`{"sampling":{}}`:                true,
		`not an object`:                  true,
	} {
		s := &Session{clientCaps: []byte(caps)}
		if got := s.mayAsk(); got != want {
			t.Errorf("mayAsk(%s) = %v, want %v", caps, got, want)
		}
		if got := s.mayAsk(); got != want { // cached
			t.Errorf("mayAsk(%s) again = %v, want %v", caps, got, want)
		}
	}
}
