package fleet

import (
	"strings"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/router"
	"github.com/mcprouter/mcprouter/router/modern"
)

// readWireMeta scans a request the fleet built for a 2026-07-28 backend and reads its _meta.
func readWireMeta(t *testing.T, msg []byte) (codec.Message, modern.Meta) {
	t.Helper()
	var m codec.Message
	if err := codec.Scan(msg, &m); err != nil {
		t.Fatalf("%s: %v", msg, err)
	}
	var meta modern.Meta
	modern.ReadMeta(m.Params, &meta)
	return m, meta
}

// TestWithMeta: what a shared connection to a 2026-07-28 backend adds to each request:
// the revision, the router's own capabilities and clientInfo, and the log level of the
// client the request is for, once it set one; a request with a modern _meta of its own
// passes untouched.
func TestWithMeta(t *testing.T) {
	k := &connector{info: modern.AppendImplementation(nil, "mcprouter", "dev")}
	c := &upConn{via: k, modern: true}
	sess := new(router.Session)

	in := []byte(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"echo","_meta":{"progressToken":5}}}`)
	m, meta := readWireMeta(t, c.withMeta(nil, in, sess))
	if string(meta.Version) != modern.Version || string(m.ProgressToken) != "5" || string(m.Name) != "echo" {
		t.Fatalf("version %q, progress token %q, name %q", meta.Version, m.ProgressToken, m.Name)
	}
	if meta.Caps != modern.ReadCapabilities([]byte(routerCaps)) || !strings.Contains(string(meta.ClientInfo), `"mcprouter"`) {
		t.Fatalf("capabilities %s, client info %s: want the router's own", meta.Capabilities, meta.ClientInfo)
	}
	if meta.LogLevel != nil {
		t.Fatalf("log level %q before the client set one", meta.LogLevel)
	}

	k.setLevel(sess, "warning")
	if _, meta := readWireMeta(t, c.withMeta(nil, in, sess)); string(meta.LogLevel) != "warning" {
		t.Fatalf("log level %q, want the session's warning", meta.LogLevel)
	}
	// The router's own requests (no session) and another session's carry none.
	if _, meta := readWireMeta(t, c.withMeta(nil, in, nil)); meta.LogLevel != nil {
		t.Fatalf("the router's own request carries log level %q", meta.LogLevel)
	}
	k.forget(sess)
	if _, meta := readWireMeta(t, c.withMeta(nil, in, sess)); meta.LogLevel != nil {
		t.Fatalf("an ended session's level %q is still sent", meta.LogLevel)
	}

	own := codec.AppendRequest(nil, []byte("9"), "server/discover", nil)
	if _, meta := readWireMeta(t, c.withMeta(nil, own, nil)); string(meta.Version) != modern.Version {
		t.Fatalf("a request without params got no _meta: %s", c.withMeta(nil, own, nil))
	}

	modernReq := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"` + modern.KeyProtocolVersion + `":"2026-07-28","` + modern.KeyClientCapabilities + `":{}}}}`)
	if got := c.withMeta(nil, modernReq, sess); string(got) != string(modernReq) {
		t.Fatalf("a modern client's request was changed: %s", got)
	}
}

// TestToLegacyAnswer: what a 2025 client is told of a 2026-07-28 backend's answers.
func TestToLegacyAnswer(t *testing.T) {
	b := &backend{cfg: BackendConfig{Name: "ev"}}
	scan := func(s string) *codec.Message {
		var m codec.Message
		if err := codec.Scan([]byte(s), &m); err != nil {
			t.Fatal(err)
		}
		return &m
	}
	if _, _, _, ok := toLegacyAnswer(b, scan(`{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","content":[]}}`)); ok {
		t.Error("a complete result must pass")
	}
	code, msg, _, ok := toLegacyAnswer(b, scan(`{"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required","inputRequests":{"a":{"method":"elicitation/create","params":{}}}}}`))
	if !ok || code != codec.CodeInternalError || !strings.Contains(msg, "elicitation/create") || !strings.Contains(msg, "not translated") || !strings.Contains(msg, "ev") {
		t.Errorf("input_required: %d %q", code, msg)
	}
	code, _, _, ok = toLegacyAnswer(b, scan(`{"jsonrpc":"2.0","id":1,"error":{"code":-32020,"message":"Header mismatch"}}`))
	if !ok || code != codec.CodeInvalidParams {
		t.Errorf("a header mismatch reaches a 2025 client as %d (ok %v), want invalid params", code, ok)
	}
	if _, _, _, ok := toLegacyAnswer(b, scan(`{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"bad"}}`)); ok {
		t.Error("a code both eras share must pass")
	}
}

// TestForwardStateless follows a 2025 client's tools/call to a 2026-07-28-only backend
// through the fleet: no initialize, the backend sees the request with its _meta (and
// the progress token kept in it), the client gets the answer under its own id.
func TestForwardStateless(t *testing.T) {
	fc := newFleetClientEra(t, time.Minute, true)
	in := fc.f.set.all()[0].instances[0]
	if c := in.conn.Load(); c == nil || !c.modern || in.era.Load() != eraModern {
		t.Fatal("the 2026-only backend is not used statelessly")
	}
	fc.send(`{"jsonrpc":"2.0","id":"c1","method":"tools/call","params":{"name":"a__echo","_meta":{"progressToken":"p1"}}}`)
	m := fc.upstream()
	var meta modern.Meta
	modern.ReadMeta(m.Params, &meta)
	if string(m.Name) != "echo" || string(meta.Version) != modern.Version || meta.Capabilities == nil || string(m.ProgressToken) != string(m.ID) {
		t.Fatalf("backend got name %s, _meta version %q, capabilities %s, progress token %s (id %s)", m.Name, meta.Version, meta.Capabilities, m.ProgressToken, m.ID)
	}
	fc.answer(m.ID, `{"resultType":"complete","content":[]}`)
	if r := fc.read(); r.Kind != codec.KindResult || string(r.ID) != `"c1"` {
		t.Fatalf("client got kind %v id %s, want the result of \"c1\"", r.Kind, r.ID)
	}
}
