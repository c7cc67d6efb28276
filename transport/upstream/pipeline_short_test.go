package upstream

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/internal/testwait"
)

// pipelineMode is a way of pipelining the pipeline tests run in: opts turns a test's
// options (Pipeline set) into the mode's.
type pipelineMode struct {
	name string
	opts func(HTTPOptions) HTTPOptions
}

// pipelineModes: every call pipelined (Pipeline alone), and PipelineShort with the echo
// tool known to be short beforehand, any time counted as short and a lone call
// pipelined too (PipelineLone), so that both modes pipeline the same calls and the
// tests' other rules (retries, failures, Close) are checked in both.
var pipelineModes = []pipelineMode{
	{"every call", func(o HTTPOptions) HTTPOptions { return o }},
	{"short calls", func(o HTTPOptions) HTTPOptions {
		o.PipelineShort, o.PipelineShortBound, o.CallTimes = true, time.Hour, knownShort("echo")
		o.PipelineLone = true
		return o
	}},
}

// forPipelineModes runs test in every pipelineMode.
func forPipelineModes(t *testing.T, test func(t *testing.T, mode func(HTTPOptions) HTTPOptions)) {
	for _, m := range pipelineModes {
		t.Run(m.name, func(t *testing.T) { test(t, m.opts) })
	}
}

// knownShort returns a record where tools/call of each tool has been seen short as
// often in a row as a kind must be to pipeline.
func knownShort(tools ...string) *CallTimes {
	ct := NewCallTimes()
	for _, tool := range tools {
		feed(ct, toolKind(tool), shortClean, 50*time.Microsecond)
	}
	return ct
}

// toolKind is the kind of a tools/call of tool.
func toolKind(tool string) callKind {
	return kindOf(&codec.Message{Kind: codec.KindRequest, Method: []byte("tools/call"), Name: []byte(tool)})
}

var toolRe = regexp.MustCompile(`"name":"(\w+)","arguments":\{"text":"(\w*)"`)

// toolBackend answers tools/call: sleep naps napTime, or with the text "hold" tells
// held and waits for release; anything else is answered at once.
func toolBackend(t *testing.T, held chan<- struct{}, release <-chan struct{}) string {
	srv, _ := pipeServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if m := toolRe.FindSubmatch(b); m != nil && string(m[1]) == "sleep" {
			if string(m[2]) == "hold" {
				held <- struct{}{}
				select {
				case <-release:
				case <-r.Context().Done():
				}
			} else {
				time.Sleep(napTime)
			}
		}
		writeEcho(w, requestID(b))
	}))
	return srv.URL
}

// napTime is how long the sleep tool of toolBackend takes when not held, and
// napBound the short bound the tests that nap use: an echo is short against it
// (typically under it, and never slow) even on a busy machine, a nap is not.
const napTime, napBound = 100 * time.Millisecond, 20 * time.Millisecond

// In PipelineShort mode a call of a slow kind, or of a kind never seen, goes to the
// pool: the calls of a short kind sent while it runs are pipelined and answered
// before it, even with a window that would let them queue behind anything.
func TestPipelineShortSlowKindNoFollowers(t *testing.T) {
	for _, seen := range []bool{true, false} {
		name := "never seen"
		if seen {
			name = "seen slow"
		}
		t.Run(name, func(t *testing.T) {
			held, release := make(chan struct{}), make(chan struct{})
			url := toolBackend(t, held, release)
			c, _ := dialHTTP(t, url, HTTPOptions{PipelineShort: true, PipelineShortBound: napBound, Pipeline: 1,
				PipelineWindow: time.Hour, PipelineLone: true, CallTimes: knownShort("echo")})
			defer c.Close()
			send(t, c, msgCall(1000, "echo", "warm"))
			if seen {
				send(t, c, msgCall(2000, "sleep", "nap"))
			}
			if _, ok := c.pipe.calls.predict(toolKind("echo"), c.pipe.bound); !ok {
				t.Fatal("echo is not short after the warm-up")
			}
			if _, ok := c.pipe.calls.predict(toolKind("sleep"), c.pipe.bound); ok {
				t.Fatal("sleep is short")
			}
			slow := make(chan error, 1)
			go func() { slow <- c.Send(testCtx(t), []byte(msgCall(1, "sleep", "hold"))) }()
			testwait.Recv(t, "the slow call at the backend", waitLimit, held)
			if n := outstanding(c); n != 0 {
				t.Fatalf("the slow call is on a pipelined connection (%d outstanding)", n)
			}
			sendAllOK(t, c, 100, 16) // all answered while the slow call is held
			if len(pipeConns(c)) != 1 {
				t.Fatal("the short calls were not pipelined")
			}
			close(release)
			if err := <-slow; err != nil {
				t.Fatalf("slow call: %v", err)
			}
		})
	}
}

// send sends msg and fails the test on an error.
func send(t *testing.T, c Conn, msg string) {
	t.Helper()
	if err := c.Send(testCtx(t), []byte(msg)); err != nil {
		t.Fatalf("%s: %v", msg, err)
	}
}

// In PipelineShort mode calls of a kind seen short are pipelined: they queue on the
// connection behind a call the backend holds.
func TestPipelineShortFastKindPipelines(t *testing.T) {
	const n = 16
	held, release := make(chan struct{}), make(chan struct{})
	url := toolBackend(t, held, release)
	// Any time counts as short, so that a busy machine cannot make echo look slow.
	c, s := dialHTTP(t, url, HTTPOptions{PipelineShort: true, PipelineShortBound: time.Hour, Pipeline: 1,
		PipelineWindow: time.Hour, PipelineLone: true, CallTimes: knownShort("echo")})
	defer c.Close()
	send(t, c, msgCall(1000, "echo", "warm"))
	// A short kind held by the backend (sleep, known short from elsewhere) heads the
	// connection; the echo calls queue behind it.
	feed(c.pipe.calls, toolKind("sleep"), shortClean, 50*time.Microsecond)
	first := make(chan error, 1)
	go func() { first <- c.Send(testCtx(t), []byte(msgCall(1, "sleep", "hold"))) }()
	testwait.Recv(t, "the first call at the backend", waitLimit, held)
	done := make(chan []error)
	go func() { done <- sendAll(t, c, 2, n) }()
	s.waitFor(t, "the echo calls to queue behind the held one", func() bool { return outstanding(c) == n+1 })
	close(release)
	for i, err := range append(<-done, <-first) {
		if err != nil {
			t.Fatalf("call %d: %v", i+2, err)
		}
	}
}

// A busy connection takes a request behind others only while their estimates add up
// to at most the budget (and their oldest is younger than the window).
func TestPipelineShortBudget(t *testing.T) {
	o := HTTPOptions{PipelineShort: true, PipelineWindow: time.Hour}.withDefaults()
	p := newPipeline("127.0.0.1:1", false, &o, &connSet{})
	p.budget = 1000
	pc := &pipeConn{p: p, wake: make(chan struct{}, 1), lastUsed: time.Now()}
	for i, want := range []bool{true, true, true, false} {
		if _, ok := pc.load(time.Now(), 0); ok != want {
			t.Fatalf("with %dµs owed: takes a request %v, want %v", pc.owed, ok, want)
		}
		if i < 3 && !pc.enqueue(&pipeCall{est: 400}) {
			t.Fatal("enqueue refused")
		}
	}
	pc.mu.Lock()
	c := pc.queue[0]
	pc.settledLocked(c)
	pc.mu.Unlock()
	if _, ok := pc.load(time.Now(), 0); !ok || pc.owed != 800 {
		t.Fatalf("after one answer: %dµs owed, takes a request %v; want 800µs, true", pc.owed, ok)
	}
}

// A call given up after the bound counts as slow for its kind.
func TestPipelineShortAbandonIsSlow(t *testing.T) {
	held, release := make(chan struct{}, 1), make(chan struct{})
	defer close(release)
	url := toolBackend(t, held, release)
	ct := knownShort("sleep")
	c, _ := dialHTTP(t, url, HTTPOptions{PipelineShort: true, Pipeline: 1, CallTimes: ct, PipelineLone: true})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := c.Send(ctx, []byte(msgCall(1, "sleep", "hold"))); err == nil {
		t.Fatal("a held call succeeded")
	}
	if _, ok := ct.predict(toolKind("sleep"), c.pipe.bound); ok {
		t.Fatal("sleep is still short after a call given up past the bound")
	}
}

// A pick that sees a connection's oldest request waiting past the slow limit books its
// kind slow at once, and only once, long before its reply comes.
func TestPipelineShortStallBookedEarly(t *testing.T) {
	o := HTTPOptions{PipelineShort: true, CallTimes: knownShort("sleep")}.withDefaults()
	p := newPipeline("127.0.0.1:1", false, &o, &connSet{})
	pc := &pipeConn{p: p, wake: make(chan struct{}, 1), lastUsed: time.Now()}
	c := &pipeCall{kind: toolKind("sleep")}
	if !pc.enqueue(c) {
		t.Fatal("enqueue refused")
	}
	if pc.load(c.since.Add(p.slow), 0); !shortKind(p, "sleep") {
		t.Fatal("booked slow at the slow limit")
	}
	feed(p.calls, toolKind("sleep"), shortClean, 50*time.Microsecond) // still short: only one booking below
	if pc.load(c.since.Add(p.slow+time.Millisecond), 0); shortKind(p, "sleep") || !c.stalled {
		t.Fatal("still short after a pick saw its call waiting past the slow limit")
	}
	feed(p.calls, toolKind("sleep"), shortClean, 50*time.Microsecond)
	if pc.load(c.since.Add(2*p.slow), 0); !shortKind(p, "sleep") {
		t.Fatal("one waiting call booked slow twice")
	}
}

// shortKind reports whether p predicts tools/call of tool short.
func shortKind(p *pipeline, tool string) bool {
	_, ok := p.calls.predict(toolKind(tool), p.bound)
	return ok
}

// In PipelineShort mode a call tries the pipeline only while at least
// defaultMinInFlight other calls are in flight, pooled or pipelined (PipelineLone:
// always); without PipelineShort, always.
func TestPipelineMinInFlight(t *testing.T) {
	for _, c := range []struct {
		opts  HTTPOptions
		first int // the first call (counting from 0) that may try the pipeline
	}{
		{HTTPOptions{PipelineShort: true}, defaultMinInFlight},
		{HTTPOptions{PipelineShort: true, PipelineLone: true}, 0},
		{HTTPOptions{Pipeline: 1}, 0},
	} {
		o := c.opts.withDefaults()
		p := newPipeline("127.0.0.1:1", false, &o, &connSet{})
		for round := range 2 {
			for i := range defaultMinInFlight + 2 {
				if _, got := p.enter(); got != (i >= c.first) {
					t.Fatalf("%+v, round %d: call %d may pipeline %v, want %v", c.opts, round, i, got, !got)
				}
			}
			for range defaultMinInFlight + 2 {
				p.leave()
			}
		}
	}
}

// In PipelineShort mode, once the pipelined writes have carried about one call each, a
// call tries the pipeline only while busyInFlight others are in flight; writes that
// carry several calls bring the lower threshold back. Without PipelineShort the
// batches do not matter.
func TestPipelineFollowsBatches(t *testing.T) {
	for _, c := range []struct {
		opts  HTTPOptions
		lone  int // the first call that may pipeline after lone writes
		after int // the same after writes of 4 calls
	}{
		{HTTPOptions{PipelineShort: true}, busyInFlight, defaultMinInFlight},
		{HTTPOptions{PipelineShort: true, PipelineLone: true}, 0, 0},
		{HTTPOptions{Pipeline: 1}, 0, 0},
	} {
		o := c.opts.withDefaults()
		p := newPipeline("127.0.0.1:1", false, &o, &connSet{})
		check := func(when string, first int) {
			t.Helper()
			for i := range busyInFlight + 2 {
				if _, got := p.enter(); got != (i >= first) {
					t.Fatalf("%+v, %s: call %d may pipeline %v, want %v", c.opts, when, i, got, !got)
				}
			}
			for range busyInFlight + 2 {
				p.leave()
			}
		}
		for range 32 {
			p.wrote(1)
		}
		check("after lone writes", c.lone)
		for range 32 {
			p.wrote(4)
		}
		check("after writes of 4", c.after)
	}
}

// A lone call of a short kind takes the pool; while the backend holds two calls, the
// next is pipelined.
func TestPipelineShortUnderConcurrency(t *testing.T) {
	held, release := make(chan struct{}, defaultMinInFlight), make(chan struct{})
	url := toolBackend(t, held, release)
	c, _ := dialHTTP(t, url, HTTPOptions{PipelineShort: true, PipelineShortBound: time.Hour,
		CallTimes: knownShort("echo")})
	defer c.Close()
	send(t, c, msgCall(1, "echo", "alone"))
	if n := len(pipeConns(c)); n != 0 {
		t.Fatalf("a lone call was pipelined (%d pipelined connections)", n)
	}
	slow := make(chan error, defaultMinInFlight)
	for i := range defaultMinInFlight {
		go func() { slow <- c.Send(testCtx(t), []byte(msgCall(10+i, "sleep", "hold"))) }()
		testwait.Recv(t, "a held call at the backend", waitLimit, held)
	}
	send(t, c, msgCall(2, "echo", "shared"))
	if n := len(pipeConns(c)); n != 1 {
		t.Fatalf("%d pipelined connections with %d calls in flight, want 1", n, defaultMinInFlight)
	}
	close(release)
	for range defaultMinInFlight {
		if err := <-slow; err != nil {
			t.Fatalf("held call: %v", err)
		}
	}
}

// A pipelined connection left idle for IdleTimeout is closed by its reader, with no
// further call to notice it, and its goroutines end; the next call opens another.
func TestPipelineIdleClosed(t *testing.T) {
	srv, cl := pipeServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeEcho(w, readID(r))
	}))
	c, s := dialHTTP(t, srv.URL, HTTPOptions{Pipeline: 1, IdleTimeout: 30 * time.Millisecond})
	defer c.Close()
	send(t, c, msgCall(1, "echo", "a"))
	pc := pipeConns(c)[0]
	s.waitFor(t, "the idle pipelined connection to close", func() bool {
		pc.mu.Lock()
		defer pc.mu.Unlock()
		return pc.dead != nil
	})
	noLeaks(t)
	send(t, c, msgCall(2, "echo", "b"))
	if n := cl.n.Load(); n != 2 {
		t.Fatalf("%d connections, want 2: the closed one and the next call's", n)
	}
}
