package router

import (
	"strings"
	"testing"
	"unsafe"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/router/modern"
	"github.com/mcprouter/mcprouter/transport"
)

// statelessExchange is an exchange as the transport hands a stateless request over
// (only what the screen reads is set).
func statelessExchange(t *testing.T, req string) *transport.Exchange {
	t.Helper()
	x := &transport.Exchange{Raw: []byte(req), Stateless: true, Carrier: transport.CarrierStreamable}
	if err := codec.Scan(x.Raw, &x.Msg); err != nil {
		t.Fatal(err)
	}
	return x
}

const testMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}`

// TestScreenReply: what a stateless client gets of an answer: resultType and the
// router's serverInfo on every result, caching fields on a cacheable one (the backend's,
// or 0 and private when it said nothing), error codes in the revision's numbering.
func TestScreenReply(t *testing.T) {
	r := newTestRouter(t, nil)
	info := `"io.modelcontextprotocol/serverInfo":{"name":"mcprouter","version":"test"}`
	cases := []struct {
		name, req, reply, want string
	}{
		{"a 2025 backend's result",
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t",` + testMeta + `}}}`,
			`{"jsonrpc":"2.0","id":1,"result":{"content":[]}}`,
			`{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","_meta":{` + info + `},"content":[]}}`},
		{"a result with its own _meta and resultType",
			`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"t",` + testMeta + `}}}`,
			`{"jsonrpc":"2.0","id":2,"result":{"resultType":"input_required","_meta":{"k":1}}}`,
			`{"jsonrpc":"2.0","id":2,"result":{"resultType":"input_required","_meta":{` + info + `,"k":1}}}`},
		{"cacheable, the backend said nothing",
			`{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri":"a://b",` + testMeta + `}}}`,
			`{"jsonrpc":"2.0","id":3,"result":{"contents":[]}}`,
			`{"jsonrpc":"2.0","id":3,"result":{"resultType":"complete","_meta":{` + info + `},"ttlMs":0,"cacheScope":"private","contents":[]}}`},
		{"cacheable, the backend's fields kept",
			`{"jsonrpc":"2.0","id":4,"method":"resources/read","params":{"uri":"a://b",` + testMeta + `}}}`,
			`{"jsonrpc":"2.0","id":4,"result":{"contents":[],"ttlMs":5000,"cacheScope":"public"}}`,
			`{"jsonrpc":"2.0","id":4,"result":{"resultType":"complete","_meta":{` + info + `},"contents":[],"ttlMs":5000,"cacheScope":"public"}}`},
		{"a 2026-07-28 backend's serverInfo replaced by the router's",
			`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"t",` + testMeta + `}}}`,
			`{"jsonrpc":"2.0","id":7,"result":{"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"backend","version":"9"},"k":1},"content":[],"resultType":"complete"}}`,
			`{"jsonrpc":"2.0","id":7,"result":{"_meta":{` + info + `,"k":1},"content":[],"resultType":"complete"}}`},
		{"resource not found renumbered",
			`{"jsonrpc":"2.0","id":5,"method":"resources/read","params":{"uri":"a://b",` + testMeta + `}}}`,
			`{"jsonrpc":"2.0","id":5,"error":{"code":-32002,"message":"Resource not found"}}`,
			`{"jsonrpc":"2.0","id":5,"error":{"code":-32602,"message":"Resource not found"}}`},
		{"other errors untouched",
			`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"t",` + testMeta + `}}}`,
			`{"jsonrpc":"2.0","id":6,"error":{"code":-32603,"message":"x"}}`,
			`{"jsonrpc":"2.0","id":6,"error":{"code":-32603,"message":"x"}}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := string(r.ScreenReply(statelessExchange(t, tc.req), []byte(tc.reply), nil))
			if got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

// TestScreenSend: log messages reach a stateless client only when its request set a
// log level, and only at that level or above; everything else passes.
func TestScreenSend(t *testing.T) {
	r := newTestRouter(t, nil)
	logAt := func(level string) string {
		return `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"` + level + `","data":"x"}}`
	}
	progress := `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}`
	noLevel := statelessExchange(t, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t",`+testMeta+`}}}`)
	warning := statelessExchange(t, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t",`+testMeta+`,"io.modelcontextprotocol/logLevel":"warning"}}}`)
	cases := []struct {
		x    *transport.Exchange
		msg  string
		pass bool
	}{
		{noLevel, logAt("emergency"), false},
		{noLevel, progress, true},
		{warning, logAt("info"), false},
		{warning, logAt("warning"), true},
		{warning, logAt("error"), true},
		{warning, progress, true},
	}
	for i, tc := range cases {
		if _, ok := r.ScreenSend(tc.x, []byte(tc.msg), nil); ok != tc.pass {
			t.Errorf("case %d: %s passed %v, want %v", i, tc.msg, ok, tc.pass)
		}
	}
}

// TestStatelessClaim: what the router serves statelessly, and the status of an answer.
func TestStatelessClaim(t *testing.T) {
	r := newTestRouter(t, nil)
	scan := func(s string) *codec.Message {
		var m codec.Message
		if err := codec.Scan([]byte(s), &m); err != nil {
			t.Fatal(err)
		}
		return &m
	}
	cases := []struct {
		msg, header string
		want        bool
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + testMeta + `}}}`, "", true},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2099-01-01"}}}`, "", true},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, "2026-07-28", true},
		{`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}`, "", false},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, "2025-11-25", false},
	}
	for _, tc := range cases {
		if got := r.Stateless(scan(tc.msg), []byte(tc.header)); got != tc.want {
			t.Errorf("Stateless(%s, %q) = %v", tc.msg, tc.header, got)
		}
	}
	if !r.Stateless(nil, []byte("2026-07-28")) || r.Stateless(nil, []byte("2025-11-25")) || r.Stateless(nil, nil) {
		t.Error("GET/DELETE judged on the header alone")
	}
	for reply, want := range map[string]int{
		`{"jsonrpc":"2.0","id":1,"result":{}}`:                                  0,
		`{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"x"}}`:        404,
		`{"jsonrpc":"2.0","id":1,"error":{"code":-32021,"message":"x"}}`:        400,
		`{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"x"}}`:        200,
		`[{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"x"}}]`:      0,
		`{"jsonrpc":"2.0","id":1,"error":{"code":-32020,"message":"mismatch"}}`: 400,
	} {
		if got := StatusOf([]byte(reply)); got != want {
			t.Errorf("StatusOf(%s) = %d, want %d", reply, got, want)
		}
	}
	if !strings.HasPrefix(DiscoverVersions[0], "2026") {
		t.Errorf("server/discover should prefer 2026-07-28: %v", DiscoverVersions)
	}
}

// TestStatelessReplyStatus: the HTTP status of a stateless reply comes from the router's
// screen, which scans the reply anyway (no StatusOf here): 200 for a result, the
// revision's status for an error the fleet answered with, whatever the backend said.
func TestStatelessReplyStatus(t *testing.T) {
	for _, tc := range []struct {
		code, want int
	}{{0, 200}, {codec.CodeMethodNotFound, 404}, {codec.CodeHeaderMismatch, 400}, {codec.CodeInternalError, 200}} {
		p := newEraPoster(t, &replyFleet{legacy: []byte(benchResLegacy), modern: []byte(benchResModern), code: tc.code}, nil)
		p.post(p.wire(benchCallModern, true))
		if got := p.ctx.Response.StatusCode(); got != tc.want {
			t.Errorf("code %d: status %d, want %d: %s", tc.code, got, tc.want, p.ctx.Response.Body())
		}
	}
}

// TestScreenReplyAllocs: a result screened into a buffer large enough allocates nothing
// (resultType added, the backend's serverInfo replaced, the status settled).
func TestScreenReplyAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under -race")
	}
	r := newTestRouter(t, nil)
	x := statelessExchange(t, benchCallModern)
	reply := []byte(`{"jsonrpc":"2.0","id":7,"result":` + benchResModern + `}`)
	buf := make([]byte, 0, 1024)
	if n := testing.AllocsPerRun(100, func() { buf = r.ScreenReply(x, reply, buf[:0]) }); n != 0 {
		t.Errorf("ScreenReply: %v allocs", n)
	}
	if !strings.Contains(string(buf), `"name":"mcprouter"`) {
		t.Errorf("screened %s", buf)
	}
}

// TestStatelessSession: a stateless request's Session keeps copies of the client's
// capabilities and info (its own, or the router's kept copy of the _meta they came in:
// metaMemos) and of the request id, whether they fit in its own room or not, and a
// _meta read from a kept copy reads as the request's own.
func TestStatelessSession(t *testing.T) {
	r := newTestRouter(t, nil)
	for _, id := range []string{`"abc"`, `"` + strings.Repeat("i", 40) + `"`} {
		for _, info := range []string{`{"name":"c","version":"1"}`, `{"name":"` + strings.Repeat("x", 300) + `","version":"1"}`,
			`{"name":"` + strings.Repeat("y", 2000) + `","version":"1"}`} {
			for _, extra := range []string{"", `,"progressToken":5`} {
				req := `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"t","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
					`"io.modelcontextprotocol/clientCapabilities":{"sampling":{}},"io.modelcontextprotocol/clientInfo":` + info + extra + `}}}`
				for round := 0; round < 2; round++ { // the second finds the first's copy
					x := statelessExchange(t, req)
					var want, meta modern.Meta
					modern.ReadMeta(x.Msg.Params, &want)
					memo := r.modern.metas.read(&x.Msg, &meta)
					kept := memo != nil
					if kept != (extra == "" && len(x.Msg.Meta) <= metaMemoMax) {
						t.Errorf("%s: kept %v", x.Msg.Meta, kept)
					}
					if string(meta.Version) != string(want.Version) || string(meta.Capabilities) != string(want.Capabilities) ||
						string(meta.ClientInfo) != string(want.ClientInfo) || meta.Caps != want.Caps || !meta.Claimed(nil) {
						t.Errorf("%s: read %+v, want %+v", x.Msg.Meta, meta, want)
					}
					q := r.statelessSession(x, &meta, memo, round == 1)
					s := &q.s
					clear(x.Raw) // the request's bytes go with its answer
					if string(s.ClientCapabilities()) != `{"sampling":{}}` || string(s.ClientInfo()) != info || string(q.id) != id ||
						!s.Stateless() || s.Version() != V20260728 {
						t.Errorf("caps %s, info %s, id %s", s.ClientCapabilities(), s.ClientInfo(), q.id)
					}
					if cap(s.ClientCapabilities()) != len(s.ClientCapabilities()) || cap(s.ClientInfo()) != len(s.ClientInfo()) ||
						cap(q.id) != len(q.id) {
						t.Error("an append to a kept field would overwrite the next")
					}
				}
			}
		}
	}
}

// TestRouterSessionSize: every session holds a Session for its whole life, so it stays
// in the 64-byte size class (its client fields behind one pointer).
func TestRouterSessionSize(t *testing.T) {
	if n := unsafe.Sizeof(Session{}); n > 64 {
		t.Errorf("Session is %d bytes, more than 64", n)
	}
}

// TestStatelessCallSize: the one allocation of a stateless request that is not pooled (a
// listen stream's, held for hours; a stdio client's) stays in the 144-byte size class
// (statelessInline); a field more puts every such request in the next.
func TestStatelessCallSize(t *testing.T) {
	if n := unsafe.Sizeof(statelessCall{}); n > 144 {
		t.Errorf("statelessCall is %d bytes, more than 144", n)
	}
}
