package router

import (
	"strings"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/internal/testwait"
	"github.com/mcprouter/mcprouter/transport"
)

// runFleet forwards every request to Run, which answers it: the shape of a real
// forward, for counting where Run ran.
type runFleet struct {
	stubFleet
	// no makes RunsOnCaller say no; within is the time it was last offered.
	no     bool
	within time.Duration
}

func (f *runFleet) RunsOnCaller(_ *Session, _ *transport.Exchange, within time.Duration) bool {
	f.within = within // on the caller, before Run: the test reads it after the answer
	return !f.no
}

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

// TestRunOnCaller: with Config.RunOnCaller and a CallerFleet that agrees, a session's
// lone request on Streamable HTTP is forwarded on the request's goroutine, whatever
// its client declared (a backend's requests to it travel on the POST's stream, which
// the fleet hands off); a batch, a fleet that says no or a router without the option
// give it a pool worker, and every request is answered either way.
func TestRunOnCaller(t *testing.T) {
	newRouter := func(on bool, f *runFleet) *Router {
		r, err := New(Config{Name: "mcprouter", Version: "test", Fleet: f, RunOnCaller: on})
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

	f := &runFleet{}
	r := newRouter(true, f)
	h := newHTTPHarness(t, r, 0)
	for _, caps := range []string{`{}`, `{"sampling":{},"roots":{}}`} {
		before, _ := ranInline(r)
		sid := h.initializeBody(initializeWith(caps, `{"name":"t","version":"1"}`))
		for range 3 {
			check(h, sid, V20250618, call, `"id":2,"result":{"content":[]}`)
		}
		if after, submitted := ranInline(r); after == before || after > submitted {
			t.Errorf("a client declaring %s: %d of %d ran on the caller, want some", caps, after-before, submitted)
		}
	}
	if f.within != 10*time.Minute {
		t.Errorf("RunsOnCaller offered %v, want the transport's default reply timeout", f.within)
	}

	before, _ := ranInline(r)
	old := h.initializeBody(strings.Replace(initializeWith(`{}`, `{"name":"t","version":"1"}`), "2025-06-18", V20250326, 1))
	check(h, old, V20250326, `[`+call+`,{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"y"}}]`, `"id":3,"result":{"content":[]}`)
	if after, _ := ranInline(r); after != before {
		t.Errorf("a batch ran %d requests on the caller", after-before)
	}

	for name, r := range map[string]*Router{"a fleet that says no": newRouter(true, &runFleet{no: true}), "without RunOnCaller": newRouter(false, &runFleet{})} {
		h := newHTTPHarness(t, r, 0)
		sid := h.initializeBody(initializeWith(`{}`, `{"name":"t","version":"1"}`))
		check(h, sid, V20250618, call, `"id":2,"result":{"content":[]}`)
		if inline, _ := ranInline(r); inline != 0 {
			t.Errorf("%s, %d requests ran on the caller", name, inline)
		}
	}
}
