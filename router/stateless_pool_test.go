package router

import (
	"strconv"
	"sync"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/mcprouter/mcprouter/transport"
)

// TestStatelessCallAllocs: a plain 2026-07-28 call allocates nothing in the transport
// and the router, as a 2025-11-25 session's call does not: its Session is a pooled one
// that the call before gave back when it finished (statelessCall.Unused). The fleet
// answers at once, as a backend's reply is handed back (replyFleet, a StatelessFleet as
// the real one is, so that the router registers the abandon hook that pooling waits
// for). The race detector allocates on its own: the counts are checked without it.
func TestStatelessCallAllocs(t *testing.T) {
	p := newEraPoster(t, &replyFleet{legacy: []byte(benchResLegacy), modern: []byte(benchResModern)}, StatusOf)
	for _, c := range []struct {
		name string
		wire []byte
	}{{"2025-11-25 session call", p.wire(benchCallLegacy, false)}, {"2026-07-28 stateless call", p.wire(benchCallModern, true)}} {
		p.postDirect(c.wire) // the pools and the _meta memo filled
		if st := p.ctx.Response.StatusCode(); st != fasthttp.StatusOK {
			t.Fatalf("%s: status %d: %s", c.name, st, p.ctx.Response.Body())
		}
		n := testing.AllocsPerRun(500, func() { p.postDirect(c.wire) })
		if !raceEnabled && n != 0 {
			t.Errorf("%s: %.1f allocations per call, want 0", c.name, n)
		}
	}
}

// keepFleet is replyFleet keeping what the real fleet's long holders keep of stateless
// requests past their answer: a listen stream's Session (Listen; the router never pools
// one), and the Session of a call it Keeps (tool "keep", as a principal's upstream
// session keeps its first request's). It notes the Session of every other call.
type keepFleet struct {
	replyFleet
	mu    sync.Mutex
	kept  []keptSession
	plain map[*Session]bool
}

// keptSession is a kept Session and the capabilities its request declared.
type keptSession struct {
	s    *Session
	caps string
}

func (f *keepFleet) Prepare(s *Session, x *transport.Exchange) bool {
	f.mu.Lock()
	if string(x.Msg.Name) == "keep" {
		f.kept = append(f.kept, keptSession{s.Keep(), string(s.ClientCapabilities())})
	} else {
		f.plain[s] = true
	}
	f.mu.Unlock()
	return f.replyFleet.Prepare(s, x)
}

func (f *keepFleet) Listen(s *Session, x *transport.Exchange) {
	f.mu.Lock()
	f.kept = append(f.kept, keptSession{s, string(s.ClientCapabilities())})
	f.mu.Unlock()
	x.Done()
}

// check reports a kept Session that no longer reads as its request's; false when it did.
func (f *keepFleet) check(t *testing.T) bool {
	f.mu.Lock()
	kept := append([]keptSession(nil), f.kept...)
	f.mu.Unlock()
	for _, k := range kept {
		if !k.s.Stateless() || k.s.Version() != V20260728 || string(k.s.ClientCapabilities()) != k.caps || k.s.r == nil {
			t.Errorf("a kept Session reads version %q, caps %s, stateless %v: recycled", k.s.Version(), k.s.ClientCapabilities(), k.s.Stateless())
			return false
		}
	}
	return true
}

// TestStatelessSessionsKept: a listen stream's Session and a Session the fleet Kept stay
// their requests' while plain calls take pooled Sessions and give them back, many
// times over; the plain calls' Sessions are reused (that is the pool), never a kept one.
// A reader goroutine reads the kept Sessions meanwhile: one recycled under it races
// with the write that clears it, which -race reports.
func TestStatelessSessionsKept(t *testing.T) {
	f := &keepFleet{replyFleet: replyFleet{legacy: []byte(benchResLegacy), modern: []byte(benchResModern)}, plain: map[*Session]bool{}}
	p := newEraPoster(t, f, StatusOf)
	request := func(id int, method, name, caps string) []byte {
		params := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":` + caps + `}`
		switch {
		case name != "":
			params = `"name":"` + name + `","arguments":{},` + params
		case method == "subscriptions/listen":
			params = `"notifications":{"toolsListChanged":true},` + params
		}
		return p.wireModern(`{"jsonrpc":"2.0","id":`+strconv.Itoa(id)+`,"method":"`+method+`","params":{`+params+`}}`, method, name)
	}
	p.post(request(1, "tools/call", "keep", `{"sampling":{}}`))
	p.post(request(2, "subscriptions/listen", "", `{"roots":{}}`))
	p.post(request(3, "tools/call", "keep", `{"elicitation":{"form":{}}}`))
	if len(f.kept) != 3 {
		t.Fatalf("%d Sessions kept, want 3", len(f.kept))
	}
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 1_000_000; i++ {
			select {
			case <-stop:
				return
			default:
				if !f.check(t) {
					return
				}
			}
		}
	}()
	const calls = 300
	for i := range calls {
		p.post(request(10+i, "tools/call", "echo", `{"roots":{"listChanged":true}}`))
		if st := p.ctx.Response.StatusCode(); st != fasthttp.StatusOK {
			t.Fatalf("call %d: status %d: %s", i, st, p.ctx.Response.Body())
		}
	}
	close(stop)
	<-done
	f.check(t)
	if len(f.plain) == calls {
		t.Errorf("%d plain calls had %d Sessions: none was reused", calls, len(f.plain))
	}
	for _, k := range f.kept {
		if f.plain[k.s] {
			t.Errorf("a kept Session (caps %s) was given to a plain call", k.caps)
		}
	}
}
