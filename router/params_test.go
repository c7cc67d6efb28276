package router

// Strict params through the router (issue 16): in every revision, a request whose params
// break the revision's schema gets -32602 naming the member before anything answers or
// routes it, a notification whose params break it is dropped, and valid ones still reach
// the router's own answers or the fleet.

import (
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/transport"
)

// echoFleet answers every request it is given with {"routed":"<method>"} and counts the
// notifications that reach it: what got past the router's checks.
type echoFleet struct {
	stubFleet
	notifications atomic.Int32
}

func (f *echoFleet) AppendCapabilities(dst []byte, _ string) []byte {
	return append(dst, `,"tools":{},"resources":{"subscribe":true},"prompts":{},"completions":{}`...)
}
func (f *echoFleet) Native() bool { return true } // serve 2026-07-28 statelessly

func (f *echoFleet) Prepare(s *Session, x *transport.Exchange) bool {
	if x.Msg.Kind != codec.KindRequest {
		if x.Msg.Kind == codec.KindNotification {
			f.notifications.Add(1)
		}
		x.Done()
		return false
	}
	x.Reply(codec.AppendResult(nil, x.Msg.ID, []byte(`{"routed":`+string(codec.AppendQuote(nil, x.Msg.Method))+`}`)))
	return false
}

func (f *echoFleet) Run(*Session, *transport.Exchange) {
	panic("echoFleet.Run: Prepare answers everything")
}

// paramsCase is one request and what must come back: the path of the member named by
// -32602 (want), or, when want is "", a result containing ok.
type paramsCase struct {
	method, params string // params "" sends none
	want           string // the member -32602 names, e.g. "params.uri"
	ok             string // a substring of the result when the request passes
	upTo           string // the newest revision the row applies to ("" any)
}

var paramsCases = []paramsCase{
	{method: "tools/call", params: `{"arguments":{}}`, want: "params.name"},
	{method: "tools/call", params: `{"name":7}`, want: "params.name"},
	{method: "tools/call", params: `{"name":"echo","arguments":"x"}`, want: "params.arguments"},
	{method: "tools/call", params: `{"name":"echo","arguments":{"q":1}}`, ok: `"routed":"tools/call"`},
	{method: "tools/call", want: "params", upTo: V20251125}, // 2026-07-28 params always carry _meta

	{method: "resources/read", params: `{}`, want: "params.uri"},
	{method: "resources/read", params: `{"uri":42}`, want: "params.uri"},
	{method: "resources/read", params: `{"uri":"file:///a.txt"}`, ok: `"routed":"resources/read"`},

	{method: "prompts/get", params: `{}`, want: "params.name"},
	{method: "prompts/get", params: `{"name":["p"]}`, want: "params.name"},
	{method: "prompts/get", params: `{"name":"p","arguments":{"a":1}}`, want: "params.arguments.a"},
	{method: "prompts/get", params: `{"name":"p","arguments":{"a":"b"}}`, ok: `"routed":"prompts/get"`},

	// resources/subscribe is replaced by subscriptions/listen in 2026-07-28.
	{method: "resources/subscribe", params: `{}`, want: "params.uri", upTo: V20251125},
	{method: "resources/subscribe", params: `{"uri":null}`, want: "params.uri", upTo: V20251125},
	{method: "resources/subscribe", params: `{"uri":"file:///a.txt"}`, ok: `"routed":"resources/subscribe"`, upTo: V20251125},
	{method: "resources/unsubscribe", params: `{"uri":{}}`, want: "params.uri", upTo: V20251125},

	{method: "completion/complete", params: `{"argument":{"name":"a","value":"v"}}`, want: "params.ref"},
	{method: "completion/complete", params: `{"ref":{"type":"ref/prompt","name":1},"argument":{"name":"a","value":"v"}}`, want: "params.ref.name"},
	{method: "completion/complete", params: `{"ref":{"type":"ref/resource","uri":1},"argument":{"name":"a","value":"v"}}`, want: "params.ref.uri"},
	{method: "completion/complete", params: `{"ref":{"type":"ref/prompt","name":"p"},"argument":{"name":"a"}}`, want: "params.argument.value"},
	{method: "completion/complete", params: `{"ref":{"type":"ref/prompt","name":"p"},"argument":{"name":"a","value":"v"}}`, ok: `"routed":"completion/complete"`},

	// logging/setLevel is the router's own answer; 2026-07-28 has the level in _meta.
	{method: "logging/setLevel", params: `{}`, want: "params.level", upTo: V20251125},
	{method: "logging/setLevel", params: `{"level":5}`, want: "params.level", upTo: V20251125},
	{method: "logging/setLevel", params: `{"level":"loud"}`, want: "params.level", upTo: V20251125},
	{method: "logging/setLevel", params: `{"level":"warning"}`, ok: `"result":{}`, upTo: V20251125},

	{method: "tools/list", params: `{"cursor":5}`, want: "params.cursor"},
	{method: "tools/list", params: `{"cursor":"c1"}`, ok: `"routed":"tools/list"`},
	{method: "resources/list", params: `{"cursor":{}}`, want: "params.cursor"},
	{method: "resources/list", params: `{"cursor":"c1"}`, ok: `"routed":"resources/list"`},
	{method: "resources/templates/list", params: `{"cursor":true}`, want: "params.cursor"},
	{method: "resources/templates/list", params: `{"cursor":"c1"}`, ok: `"routed":"resources/templates/list"`},
	{method: "prompts/list", params: `{"cursor":[]}`, want: "params.cursor"},
	{method: "prompts/list", params: `{"cursor":"c1"}`, ok: `"routed":"prompts/list"`},

	{method: "ping", params: `{"_meta":5}`, want: "params._meta", upTo: V20251125},
	{method: "ping", ok: `"result":{}`, upTo: V20251125},
}

// TestStrictParams runs paramsCases in each session revision over stdio, and in
// 2026-07-28 statelessly (each request with its _meta).
func TestStrictParams(t *testing.T) {
	revs := append(append([]string(nil), Versions...), V20260728)
	for _, rev := range revs {
		t.Run(rev, func(t *testing.T) {
			f := &echoFleet{}
			r := newTestRouter(t, f)
			s := openStdio(t, r)
			if rev != V20260728 {
				s.send(`{"jsonrpc":"2.0","id":"i","method":"initialize","params":{"protocolVersion":"` + rev + `","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
				if got := s.recv(); !strings.Contains(got, `"protocolVersion":"`+rev+`"`) {
					t.Fatalf("initialize: %s", got)
				}
				s.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
			}
			for i, c := range paramsCases {
				if c.upTo != "" && rev > c.upTo {
					continue
				}
				req := `{"jsonrpc":"2.0","id":` + strconv.Itoa(i) + `,"method":"` + c.method + `"`
				if p := withMeta(rev, c.params); p != "" {
					req += `,"params":` + p
				}
				s.send(req + "}")
				got := s.recv()
				if c.want != "" {
					if !strings.Contains(got, `"code":-32602`) || !strings.Contains(got, `"path":`+string(codec.AppendQuote(nil, []byte(c.want)))) ||
						!strings.Contains(got, `"message":`+strings.TrimSuffix(string(codec.AppendQuote(nil, []byte(c.want+": "))), `"`)) {
						t.Errorf("%s %s: %s\nwant -32602 naming %s", c.method, c.params, got, c.want)
					}
					continue
				}
				if !strings.Contains(got, `"result":`) || !strings.Contains(got, c.ok) {
					t.Errorf("%s %s: %s\nwant a result with %s", c.method, c.params, got, c.ok)
				}
			}
			if rev == V20260728 {
				return // a stateless notification concerns nothing the fleet holds
			}
			// A notification with broken params is dropped (nothing answers one); a valid one
			// reaches the fleet. The ping after each orders the check after its handling.
			for _, n := range []struct {
				params string
				want   int32
			}{{`{"progress":1}`, 0}, {`{"progressToken":"t","progress":"1"}`, 0}, {`{"progressToken":"t","progress":1}`, 1}} {
				s.send(`{"jsonrpc":"2.0","method":"notifications/progress","params":` + n.params + `}`)
				s.send(`{"jsonrpc":"2.0","id":"p","method":"ping"}`)
				if got := s.recv(); !strings.Contains(got, `"id":"p","result":{}`) {
					t.Fatalf("ping after a notification: %s", got)
				}
				if got := f.notifications.Load(); got != n.want {
					t.Errorf("notifications/progress %s: %d notifications reached the fleet, want %d", n.params, got, n.want)
				}
			}
		})
	}
}

// TestStrictParamsBeforeInitialize: without a session, initialize is checked against
// the newest revision, and its missing members are named.
func TestStrictParamsBeforeInitialize(t *testing.T) {
	r := newTestRouter(t, &echoFleet{})
	s := openStdio(t, r)
	for _, c := range []struct{ params, want string }{
		{`{"capabilities":{},"clientInfo":{"name":"t","version":"1"}}`, "params.protocolVersion"},
		{`{"protocolVersion":"2025-11-25","clientInfo":{"name":"t","version":"1"}}`, "params.capabilities"},
		{`{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"version":"1"}}`, "params.clientInfo.name"},
		{`{"protocolVersion":"2025-11-25","capabilities":{"roots":true},"clientInfo":{"name":"t","version":"1"}}`, "params.capabilities.roots"},
	} {
		s.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":` + c.params + `}`)
		if got := s.recv(); !strings.Contains(got, `"code":-32602`) || !strings.Contains(got, `"path":"`+c.want+`"`) {
			t.Errorf("initialize %s: %s\nwant -32602 naming %s", c.params, got, c.want)
		}
	}
}

// withMeta returns params as a request of rev carries them: a 2026-07-28 request's
// params start with its _meta (revision and capabilities), which make it stateless.
func withMeta(rev, params string) string {
	if rev != V20260728 {
		return params
	}
	const meta = `{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	switch {
	case params == "" || params == "{}":
		return meta + "}"
	case strings.HasPrefix(params, `{"_meta":`):
		return params // the row is about _meta itself
	}
	return meta + "," + params[1:]
}

// TestRefuseParamsAllocs: checking valid params adds no allocation to the path of a
// request, in a session revision or statelessly.
func TestRefuseParamsAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under -race")
	}
	for _, c := range []struct{ rev, req string }{
		{V20251125, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search","arguments":{"q":"x","n":3},"_meta":{"progressToken":1}}}`},
		{V20241105, `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"file:///a.txt"}}`},
		{V20260728, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{` + testMeta + `},"name":"search","arguments":{"q":"x"}}}`},
	} {
		x := statelessExchange(t, c.req)
		j := &job{x: x}
		if n := testing.AllocsPerRun(100, func() {
			if j.refuseParams(c.rev, x.Msg.Method) {
				t.Fatal("valid params refused")
			}
		}); n != 0 {
			t.Errorf("%s %s: %v allocs", c.rev, x.Msg.Method, n)
		}
	}
}
