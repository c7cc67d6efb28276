package fleettest

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/internal/testbin"
	"github.com/mcprouter/mcprouter/internal/testwait"
)

// Hostile backends (issue 16): mcpbackend --fault all plays every misbehaviour a router
// meets, one tool each (fault_slow_bytes, fault_oversize, ...), beside its well-behaved
// tools. Each test puts a router in front of a hostile HTTP backend, a hostile stdio
// backend and a healthy one, and checks that the affected call gets exactly one answer,
// a JSON-RPC error that says what happened, within its timeout; that nothing else is
// answered; that the hostile backend's other calls and the healthy backend still work;
// and that the router's goroutines and memory come back to where they were.

// Backends of the hostile fleet.
const (
	goodName = "good" // healthy, Streamable HTTP
	hhName   = "hh"   // hostile, Streamable HTTP
	hsName   = "hs"   // hostile, stdio (one child process)
	hlName   = "hl"   // hostile, legacy HTTP+SSE (hh's process, on its /sse endpoint)
	// hostileTimeout is the hostile backends' request timeout: what a call that gets no
	// usable answer waits before the router's -32011.
	hostileTimeout = 3 * time.Second
	// hostileItem is a resource only hh serves (--resources 1), for the update flood.
	hostileItem = "item://0001"
)

// hostileFleet is a router in front of hh, hs and good.
type hostileFleet struct {
	*fleet
	good, hh *proc
	mu       sync.Mutex
	clients  []*hostileClient
}

// startHostile starts the hostile fleet, hh and hs spoken to in era (2025: sessions,
// 2026: stateless 2026-07-28).
func startHostile(t *testing.T, era string) *hostileFleet {
	t.Helper()
	h := &hostileFleet{fleet: &fleet{t: t, dir: t.TempDir()}}
	h.good = startBackend(t, "127.0.0.1:0", "--name", goodName)
	// A short keep-alive: a 2026-07-28 request is cancelled by closing its stream,
	// which the backend notices at its next keep-alive or the one after.
	h.hh = startBackend(t, "127.0.0.1:0", "--name", hhName, "--fault", "all", "--resources", "1", "--keep-alive", "500ms")
	cfg := fmt.Sprintf(`listen: 127.0.0.1:0
admin:
  listen: 127.0.0.1:0
shutdown_grace: 5s
backends:
  - name: %s
    url: http://%s/mcp
    timeout: %s
`, goodName, h.good.Addr(), backendTimeout)
	cfg += fmt.Sprintf("  - name: %s\n    url: http://%s/mcp\n    timeout: %s\n    era: %q\n", hhName, h.hh.Addr(), hostileTimeout, era)
	cfg += fmt.Sprintf("  - name: %s\n    url: http://%s/sse\n    timeout: %s\n", hlName, h.hh.Addr(), hostileTimeout)
	cfg += fmt.Sprintf("  - name: %s\n    command: [%q, stdio, --name, %s, --tick, \"0\", --fault, all]\n    timeout: %s\n    era: %q\n",
		hsName, testbin.BuildFixture(t, testbin.Backend), hsName, hostileTimeout, era)
	h.router = startRouter(t, h.dir, cfg)
	ok := testwait.Poll(wait, func() bool {
		m, err := h.metrics()
		if err != nil {
			return false
		}
		for _, b := range []string{goodName, hhName, hsName, hlName} {
			if m.get("mcprouter_backend_healthy_instances", `backend="`+b+`"`) != 1 {
				return false
			}
		}
		return true
	})
	if !ok {
		m, _ := h.metrics()
		t.Fatalf("the hostile fleet is not ready within %v:\n%s", wait, m.grep("mcprouter_backend_"))
	}
	return h
}

// hostileClient is a raw session that numbers its calls.
type hostileClient struct {
	*rawSession
	next atomic.Int64
}

func (h *hostileFleet) client(t *testing.T) *hostileClient {
	c := &hostileClient{rawSession: newRawSession(t, h.fleet)}
	c.next.Store(100)
	h.mu.Lock()
	h.clients = append(h.clients, c)
	h.mu.Unlock()
	return c
}

// callResult is what one tools/call got: its messages and the one response to it.
type callResult struct {
	id    int64
	msgs  []map[string]json.RawMessage
	resp  map[string]json.RawMessage // nil when there was not exactly one
	count int                        // responses to id
	other int                        // responses to other ids
	err   error
}

// call sends tools/call of name with args (raw JSON) and sorts what came back.
func (c *hostileClient) call(name, args string) callResult {
	id := c.next.Add(1)
	r := callResult{id: id}
	r.msgs, r.err = c.post(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, id, name, args))
	for _, m := range r.msgs {
		_, res := m["result"]
		_, isErr := m["error"]
		if !res && !isErr {
			continue
		}
		if string(m["id"]) == fmt.Sprint(id) {
			r.count++
			r.resp = m
		} else {
			r.other++
		}
	}
	if r.count != 1 {
		r.resp = nil
	}
	return r
}

// rpcError returns the code and message of the response, ok false when it is a result.
func (r callResult) rpcError() (code int, msg string, ok bool) {
	return rpcErrorOf([]map[string]json.RawMessage{r.resp})
}

// wantOne fails unless the call got exactly one response and nothing for other ids.
func (r callResult) wantOne(t *testing.T, what string) bool {
	t.Helper()
	if r.err != nil {
		t.Errorf("%s: %v", what, r.err)
		return false
	}
	if r.count != 1 || r.other != 0 {
		t.Errorf("%s: %d responses to its id and %d to others, want exactly one (messages: %d)", what, r.count, r.other, len(r.msgs))
		return false
	}
	return true
}

// wantError checks that the call got exactly one answer, a JSON-RPC error with code
// whose message says each of says.
func (r callResult) wantError(t *testing.T, what string, code int, says ...string) {
	t.Helper()
	if !r.wantOne(t, what) {
		return
	}
	got, msg, ok := r.rpcError()
	if !ok {
		t.Errorf("%s: answered %s, want error %d", what, r.resp["result"], code)
		return
	}
	if got != code {
		t.Errorf("%s: error %d %q, want %d", what, got, msg, code)
	}
	for _, s := range says {
		if !strings.Contains(msg, s) {
			t.Errorf("%s: error message %q does not say %q", what, msg, s)
		}
	}
}

// wantResult checks that the call got exactly one answer, a result.
func (r callResult) wantResult(t *testing.T, what string) {
	t.Helper()
	if !r.wantOne(t, what) {
		return
	}
	if code, msg, isErr := r.rpcError(); isErr {
		t.Errorf("%s: error %d %q, want a result", what, code, msg)
	}
}

// healthy checks that backend b answers an echo through the router again, within wait
// (a stdio backend may first have to finish writing what blocked its pipe), and that
// the healthy backend does too.
func (c *hostileClient) healthy(t *testing.T, b string) {
	t.Helper()
	var last callResult
	if !testwait.Poll(wait, func() bool {
		last = c.call(b+"__echo", `{"text":"still here"}`)
		_, _, isErr := last.rpcError()
		return last.err == nil && last.count == 1 && last.other == 0 && !isErr
	}) {
		t.Errorf("%s__echo does not answer after the fault: %v %d responses %s", b, last.err, last.count, last.resp["error"])
	}
	c.call(goodName+"__echo", `{"text":"fine"}`).wantResult(t, "good__echo")
}

// hostileCase is one hostile call and what the router must make of it.
type hostileCase struct {
	name, backend, tool, args string
	code                      int      // 0: a result
	says                      []string // in the error message
}

const (
	codeUnavailable = codec.CodeBackendUnavailable
	codeTimeout     = codec.CodeBackendTimeout
)

// runHostile plays each case, then checks that its backend recovered.
func runHostile(t *testing.T, h *hostileFleet, cases []hostileCase) {
	c := h.client(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := c.call(tc.backend+"__"+tc.tool, tc.args)
			if tc.code == 0 {
				r.wantResult(t, tc.tool)
			} else {
				r.wantError(t, tc.tool, tc.code, tc.says...)
			}
			c.healthy(t, tc.backend)
		})
	}
}

var timedOut = []string{"did not answer within " + hostileTimeout.String()}

// legacyReplies are the cases of the legacy HTTP+SSE transport (2024-11-05 only), where
// every answer travels on the one event stream: an event over the limit breaks the
// stream, which fails what was in flight on it and is re-established.
var legacyReplies = []hostileCase{
	{"oversize legacy", hlName, "fault_oversize", `{}`, codeUnavailable, []string{"too large"}},
	{"cut off legacy", hlName, "fault_invalid_json", `{}`, codeUnavailable, []string{"not valid JSON"}},
	{"garbage legacy", hlName, "fault_invalid_json", `{"shape":"garbage"}`, codeTimeout, timedOut},
	{"unknown id then answer legacy", hlName, "fault_unknown_id", `{}`, 0, nil},
	{"unknown id alone legacy", hlName, "fault_unknown_id", `{"alone":true}`, codeTimeout, timedOut},
	{"double answer legacy", hlName, "fault_double_answer", `{}`, 0, nil},
	{"never answer legacy", hlName, "fault_never_answer", `{}`, codeTimeout, timedOut},
}

// TestHostileReplies: broken answers fail their call at once (never the timeout's
// -32011 where the answer still says which call it was), stray and duplicate answers
// reach nobody, and a call that gets no answer ends at its timeout; with the hostile
// backends spoken to in either era.
func TestHostileReplies(t *testing.T) {
	for _, era := range []string{"2025", "2026"} {
		t.Run(era, func(t *testing.T) { testHostileReplies(t, startHostile(t, era)) })
	}
}

func TestHostileLegacyReplies(t *testing.T) {
	runHostile(t, startHostile(t, "2025"), legacyReplies)
}

func testHostileReplies(t *testing.T, h *hostileFleet) {
	runHostile(t, h, []hostileCase{
		{"oversize http json", hhName, "fault_oversize", `{}`, codeUnavailable, []string{"larger than the limit"}},
		{"oversize http sse", hhName, "fault_oversize", `{"sse":true}`, codeUnavailable, []string{"larger than the limit"}},
		{"oversize stdio", hsName, "fault_oversize", `{}`, codeUnavailable, []string{"larger than the limit"}},
		{"cut off http json", hhName, "fault_invalid_json", `{}`, codeUnavailable, []string{"not valid JSON"}},
		{"cut off http sse", hhName, "fault_invalid_json", `{"sse":true}`, codeUnavailable, []string{"not valid JSON"}},
		{"cut off stdio", hsName, "fault_invalid_json", `{}`, codeUnavailable, []string{"not valid JSON"}},
		{"garbage http", hhName, "fault_invalid_json", `{"shape":"garbage"}`, codeUnavailable, []string{"not valid JSON"}},
		// On stdio a line of garbage names no call: its call waits for its timeout.
		{"garbage stdio", hsName, "fault_invalid_json", `{"shape":"garbage"}`, codeTimeout, timedOut},
		{"unknown id then answer http", hhName, "fault_unknown_id", `{}`, 0, nil},
		{"unknown id then answer stdio", hsName, "fault_unknown_id", `{}`, 0, nil},
		{"unknown id alone http", hhName, "fault_unknown_id", `{"alone":true}`, codeUnavailable, []string{"no response to it"}},
		{"unknown id alone stdio", hsName, "fault_unknown_id", `{"alone":true}`, codeTimeout, timedOut},
		{"double answer http sse", hhName, "fault_double_answer", `{}`, 0, nil},
		{"double answer http batch", hhName, "fault_double_answer", `{"batch":true}`, 0, nil},
		{"double answer stdio", hsName, "fault_double_answer", `{}`, 0, nil},
		{"never answer http", hhName, "fault_never_answer", `{}`, codeTimeout, timedOut},
		{"never answer stdio", hsName, "fault_never_answer", `{}`, codeTimeout, timedOut},
	})
	// The stray and second answers were dropped, and counted: a stray one on each
	// carrier before an answer and alone, a second one three times.
	if n := h.metric("mcprouter_backend_unmatched_responses_total"); n < 7 {
		t.Errorf("mcprouter_backend_unmatched_responses_total = %v, want at least 7", n)
	}
	// The router cancelled what timed out: the hostile backend holds nothing.
	r := readStatsOf(t, h.hh)
	if !testwait.Poll(wait, func() bool { s, err := r.read(); return err == nil && s.InFlight == 0 }) {
		s, _ := r.read()
		t.Errorf("hh still holds %d calls after the router gave up on them", s.InFlight)
	}
}

// TestHostileSlowBytes: an answer written a byte at a time, slower than the timeout,
// ends at the timeout; meanwhile the hostile HTTP backend's other calls and the healthy
// backend answer; afterwards the stdio backend, whose pipe the slow line held, answers
// again and the late answer reaches nobody.
func TestHostileSlowBytes(t *testing.T) {
	h := startHostile(t, "2025")
	c := h.client(t)
	// About 100 bytes at 60 ms: twice the timeout.
	const slow = `{"msPerByte":60}`
	for _, tc := range []struct{ name, backend, args string }{
		{"http json", hhName, slow},
		{"http sse", hhName, `{"msPerByte":60,"sse":true}`},
		{"stdio", hsName, slow},
	} {
		t.Run(tc.name, func(t *testing.T) {
			done := make(chan callResult, 1)
			go func() { done <- c.call(tc.backend+"__fault_slow_bytes", tc.args) }()
			others := []string{goodName}
			if tc.backend == hhName {
				others = append(others, hhName) // other calls go on other connections
			}
			for _, b := range others {
				c.call(b+"__echo", `{"text":"beside the slow one"}`).wantResult(t, b+"__echo beside the slow call")
			}
			r := testwait.Recv(t, "the slow call's answer", wait, done)
			r.wantError(t, "fault_slow_bytes", codeTimeout, timedOut...)
			c.healthy(t, tc.backend)
		})
	}
}

// TestHostileFloods: notifications by the ten thousand, related to a call or not, do
// not grow the router's goroutines or memory without bound, and list_changed floods
// cost a few catalog fetches, not one each.
func TestHostileFloods(t *testing.T) {
	// 2025 sessions: notifications outside a request travel on the upstream session
	// (a 2026-07-28 backend has no session to send them on).
	h := startHostile(t, "2025")
	c := h.client(t)
	// A subscriber that never opens its stream: the updates to it must be dropped or
	// bounded, not kept.
	if msgs, err := c.post(`{"jsonrpc":"2.0","id":1,"method":"resources/subscribe","params":{"uri":"` + hostileItem + `"}}`); err != nil {
		t.Fatalf("subscribe: %v", err)
	} else if _, _, isErr := rpcErrorOf(msgs); isErr {
		t.Fatalf("subscribe: %v", msgs)
	}
	base := h.runtimeFigures(t)
	refreshes := h.metric("mcprouter_backend_catalog_refreshes_total")
	const n = 20000
	for _, tc := range []struct{ name, backend, args string }{
		{"log http", hhName, fmt.Sprintf(`{"count":%d}`, n)},
		{"log stdio", hsName, fmt.Sprintf(`{"count":%d}`, n)},
		{"updated http", hhName, fmt.Sprintf(`{"count":%d,"kind":"updated","uri":%q}`, n, hostileItem)},
		{"list changed http", hhName, fmt.Sprintf(`{"count":%d,"kind":"listChanged"}`, n/4)},
		{"list changed stdio", hsName, fmt.Sprintf(`{"count":%d,"kind":"listChanged"}`, n/4)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := c.call(tc.backend+"__fault_flood", tc.args)
			if r.err != nil {
				// A client that falls too far behind its call's stream is cut off (the
				// router keeps a bounded backlog for resumption): that is the router
				// protecting itself, not a failure.
				t.Logf("%s: the flooded call's stream was cut: %v", tc.name, r.err)
			} else {
				r.wantResult(t, "fault_flood")
				t.Logf("%s: %d messages came back with the answer", tc.name, len(r.msgs))
			}
			c.healthy(t, tc.backend)
		})
	}
	// Each flooded backend's catalog is read again (at least once each), but not once
	// per notice.
	var got float64
	testwait.Poll(wait, func() bool {
		got = h.metric("mcprouter_backend_catalog_refreshes_total") - refreshes
		return got >= 2
	})
	t.Logf("catalog refreshes for %d list_changed notifications from two backends: %.0f", n/2, got)
	if got < 2 || got >= n/2 {
		t.Errorf("%.0f catalog refreshes for %d list_changed notifications from two backends: want at least one each and far fewer than one per notice", got, n/2)
	}
	h.settles(t, base)
}

// runtimeFigures are the router's goroutines and heap in use, from its /metrics.
type runtimeFigures struct{ goroutines, heap float64 }

func (h *hostileFleet) runtimeFigures(t *testing.T) runtimeFigures {
	t.Helper()
	m, err := h.metrics()
	if err != nil {
		t.Fatal(err)
	}
	return runtimeFigures{m.get("go_goroutines"), m.get("go_memstats_heap_inuse_bytes")}
}

// Bounds on what a flood may leave behind in the router, once it is over: generous,
// for a garbage-collected heap on a loaded machine; a router that kept the floods
// (several MB of notifications each) or a goroutine per notice exceeds them many times.
const (
	floodGoroutines = 64
	floodHeap       = 48 << 20
)

// settles waits until the router's goroutines and heap are back within the bounds of
// base, and fails with the figures otherwise.
func (h *hostileFleet) settles(t *testing.T, base runtimeFigures) {
	t.Helper()
	// The clients' idle keep-alive connections hold a goroutine each in the router:
	// theirs, not the floods'.
	h.mu.Lock()
	for _, c := range h.clients {
		c.HTTP.CloseIdleConnections()
	}
	h.mu.Unlock()
	var now runtimeFigures
	ok := testwait.Poll(wait, func() bool {
		now = h.runtimeFigures(t)
		return now.goroutines <= base.goroutines+floodGoroutines && now.heap <= base.heap+floodHeap
	})
	t.Logf("router before: %.0f goroutines, %.1f MiB heap in use; after, settled: %.0f, %.1f MiB",
		base.goroutines, base.heap/(1<<20), now.goroutines, now.heap/(1<<20))
	if !ok {
		t.Errorf("the router did not come back within %v: goroutines %.0f -> %.0f (bound +%d), heap %.1f -> %.1f MiB (bound +%d MiB)",
			wait, base.goroutines, now.goroutines, floodGoroutines, base.heap/(1<<20), now.heap/(1<<20), floodHeap>>20)
	}
}

// TestHostileCallsAtOnce: every fault at once, many times over, beside healthy calls:
// each call gets exactly one answer and the healthy ones all succeed.
func TestHostileCallsAtOnce(t *testing.T) {
	h := startHostile(t, "2025")
	base := h.runtimeFigures(t)
	faults := []struct{ tool, args string }{
		{"fault_invalid_json", `{}`}, {"fault_unknown_id", `{}`}, {"fault_double_answer", `{}`},
		{"fault_never_answer", `{}`}, {"fault_oversize", `{"bytes":9000000}`}, {"fault_unknown_id", `{"alone":true}`},
	}
	const rounds = 3
	var wg sync.WaitGroup
	errs := make(chan string, 4*rounds*len(faults))
	for _, b := range []string{hhName, hsName} {
		c := h.client(t)
		for i := 0; i < rounds; i++ {
			for _, f := range faults {
				wg.Add(2)
				go func() {
					defer wg.Done()
					if r := c.call(b+"__"+f.tool, f.args); r.err != nil || r.count != 1 || r.other != 0 {
						errs <- fmt.Sprintf("%s__%s: %v, %d responses, %d to other ids", b, f.tool, r.err, r.count, r.other)
					}
				}()
				go func() {
					defer wg.Done()
					r := c.call(goodName+"__echo", `{"text":"x"}`)
					if _, _, isErr := r.rpcError(); r.err != nil || r.count != 1 || r.other != 0 || isErr {
						errs <- fmt.Sprintf("good__echo beside %s__%s: %v, %d responses, error %s", b, f.tool, r.err, r.count, r.resp["error"])
					}
				}()
			}
		}
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	c := h.client(t)
	c.healthy(t, hhName)
	c.healthy(t, hsName)
	h.settles(t, base)
}
