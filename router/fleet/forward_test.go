package fleet

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/router"
	"github.com/mcprouter/mcprouter/transport"
	"github.com/mcprouter/mcprouter/transport/natsbus"
	"github.com/mcprouter/mcprouter/transport/upstream"
)

// scriptedConn is an in-memory upstream.Conn that answers the router's own requests
// (initialize, tools/list, ping) at once and hands every other message to the test,
// which answers through sink when it wants to.
type scriptedConn struct {
	sink upstream.Sink
	got  chan []byte // client traffic the router forwarded (copies)
	// tools, when set, is the tools/list result instead of the one echo tool.
	tools atomic.Pointer[string]
	// modern makes it a 2026-07-28-only backend: server/discover offers that revision
	// alone, and the fleet uses it without a session.
	modern bool
	once   sync.Once
	done   chan struct{}
}

func (c *scriptedConn) Send(ctx context.Context, msg []byte) error {
	var m codec.Message
	if err := codec.Scan(msg, &m); err != nil {
		return err
	}
	var res string
	switch string(m.Method) {
	case "initialize":
		res = `{"protocolVersion":"2025-06-18","capabilities":{"tools":{},"resources":{"subscribe":true}}}`
	case "resources/list":
		res = `{"resources":[{"uri":"file:///r","name":"r"}]}`
	case "resources/templates/list":
		res = `{"resourceTemplates":[]}`
	case "tools/list":
		res = `{"tools":[{"name":"echo","inputSchema":{"type":"object"}}]}`
		if t := c.tools.Load(); t != nil {
			res = *t
		}
	case "ping", "logging/setLevel":
		res = `{}`
	case "notifications/initialized":
		return nil
	case "notifications/cancelled":
		if c.modern {
			return nil // the listen stream's end: not the test's business
		}
		return c.pass(ctx, msg)
	case "subscriptions/listen":
		if c.modern { // acknowledged, and kept open: replies travel separately, as on stdio
			c.sink.Message([]byte(`{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":` + string(m.ID) + `},"notifications":{}}}`))
			return nil
		}
		return c.pass(ctx, msg)
	case "server/discover":
		if c.modern {
			res = `{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{"tools":{}}}`
			break
		}
		// A 2025 backend: the router falls back to initialize.
		c.sink.Message(codec.AppendError(nil, m.ID, codec.CodeMethodNotFound, "Method not found", nil))
		return nil
	default:
		return c.pass(ctx, msg)
	}
	c.sink.Message(codec.AppendResult(nil, m.ID, []byte(res)))
	return nil
}

// pass hands msg to the test.
func (c *scriptedConn) pass(ctx context.Context, msg []byte) error {
	select {
	case c.got <- append([]byte(nil), msg...):
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

func (c *scriptedConn) SetProtocolVersion(string) {}
func (c *scriptedConn) Done() <-chan struct{}     { return c.done }
func (c *scriptedConn) Err() error                { return nil }
func (c *scriptedConn) Close() error              { c.once.Do(func() { close(c.done) }); return nil }

// fleetClient is a started fleet with one backend ("a", prefix "a") on a scriptedConn,
// and one client session talking to it over an in-memory stdio transport: the client
// writes lines and reads the lines the router writes back.
type fleetClient struct {
	t    testing.TB
	f    *Fleet
	up   *scriptedConn
	in   io.Writer
	out  *bufio.Scanner
	sess *router.Session
}

// fleetHandler hands a client's messages to the fleet as the router does: Prepare in
// order, Run on a goroutine of its own.
type fleetHandler struct {
	f      *Fleet
	sess   *router.Session
	tracer interface{ Start(*transport.Exchange) } // as the router's Config.Tracer; nil: none
}

func (h fleetHandler) HandleMessage(x *transport.Exchange) {
	if h.tracer != nil {
		h.tracer.Start(x)
	}
	if h.f.Prepare(h.sess, x) {
		go h.f.Run(h.sess, x)
	}
}

func (h fleetHandler) SessionClosed(*transport.Session) {}

func newFleetClient(t testing.TB, timeout time.Duration) *fleetClient {
	return newFleetClientEra(t, timeout, false)
}

// newFleetClientEra is newFleetClient with a 2026-07-28-only backend when modern.
func newFleetClientEra(t testing.TB, timeout time.Duration, modern bool) *fleetClient {
	f, up := newScriptedFleet(t, timeout, modern)
	return attachClient(t, f, up)
}

// newScriptedFleet starts a fleet of one backend, "a", on a scripted connection (a
// 2026-07-28-only backend when modern), and waits for its catalog.
func newScriptedFleet(t testing.TB, timeout time.Duration, modern bool) (*Fleet, *scriptedConn) {
	return newScriptedFleetOn(t, timeout, modern, nil)
}

// newScriptedFleetOn is newScriptedFleet on NATS bus (nil: none).
func newScriptedFleetOn(t testing.TB, timeout time.Duration, modern bool, bus *natsbus.Bus) (*Fleet, *scriptedConn) {
	up := &scriptedConn{got: make(chan []byte, 16), done: make(chan struct{}), modern: modern}
	f := New(Config{HealthInterval: time.Hour, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Bus: bus, Backends: []BackendConfig{{
		Name: "a", Prefix: "a", Timeout: timeout,
		Dialers: []Dialer{{Addr: "scripted", Dial: func(ctx context.Context, sink upstream.Sink) (upstream.Conn, error) {
			up.sink = sink
			return up, nil
		}}},
	}}})
	// Start returns once the backend's first catalog landed (or after the wait).
	f.Start(time.Minute)
	if _, ok := f.catalog.load().tools["a"+Separator+"echo"]; !ok {
		t.Fatal("Start returned before the backend's catalog landed")
	}
	return f, up
}

// attachClient opens one client session on started fleet f over an in-memory stdio
// transport; up is the backend connection the test scripts (nil if none). The session
// and the fleet end with the test.
func attachClient(t testing.TB, f *Fleet, up *scriptedConn) *fleetClient {
	return attachTracedClient(t, f, up, nil)
}

// attachTracedClient is attachClient with a tracer starting each request's trace, as
// the router does.
func attachTracedClient(t testing.TB, f *Fleet, up *scriptedConn, tracer interface{ Start(*transport.Exchange) }) *fleetClient {
	sess := new(router.Session)
	return attachHandler(t, f, up, sess, fleetHandler{f: f, sess: sess, tracer: tracer})
}

// attachHandler is attachClient with h handling the client's messages on session sess.
func attachHandler(t testing.TB, f *Fleet, up *scriptedConn, sess *router.Session, h transport.Handler) *fleetClient {
	f.SessionOpened(sess)
	reg := transport.NewRegistry(transport.RegistryConfig{InitTimeout: -1, IdleTimeout: -1}, h)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() {
		defer close(served)
		transport.ServeStdio(ctx, transport.StdioConfig{Grace: time.Second}, reg, h, inR, outW)
		outW.Close()
	}()
	t.Cleanup(func() {
		cancel()
		inW.Close()
		go io.Copy(io.Discard, outR)
		<-served
		f.SessionClosed(sess)
		f.Close()
	})
	return &fleetClient{t: t, f: f, up: up, in: inW, out: bufio.NewScanner(outR), sess: sess}
}

func (fc *fleetClient) send(line string) {
	fc.t.Helper()
	if _, err := io.WriteString(fc.in, line+"\n"); err != nil {
		fc.t.Fatal(err)
	}
}

// read returns the next line the router wrote to the client, scanned.
func (fc *fleetClient) read() codec.Message {
	fc.t.Helper()
	if !fc.out.Scan() {
		fc.t.Fatalf("client output ended: %v", fc.out.Err())
	}
	raw := append([]byte(nil), fc.out.Bytes()...)
	var m codec.Message
	if err := codec.Scan(raw, &m); err != nil {
		fc.t.Fatalf("router wrote %s: %v", raw, err)
	}
	return m
}

// upstream returns the next client message the backend received, scanned.
func (fc *fleetClient) upstream() codec.Message {
	fc.t.Helper()
	var m codec.Message
	if err := codec.Scan(<-fc.up.got, &m); err != nil {
		fc.t.Fatal(err)
	}
	return m
}

// answer sends the backend's result for wire id to the router.
func (fc *fleetClient) answer(id []byte, result string) {
	fc.up.sink.Message(codec.AppendResult(nil, id, []byte(result)))
}

// TestForwardRoundTrip follows one tools/call through the fleet: the backend sees the
// router's id, the name without its prefix and the progress token replaced by the id;
// its progress goes back with the client's token, and its answer with the client's id.
func TestForwardRoundTrip(t *testing.T) {
	fc := newFleetClient(t, time.Minute)
	fc.send(`{"jsonrpc":"2.0","id":"c1","method":"tools/call","params":{"name":"a__echo","_meta":{"progressToken":"p1"}}}`)
	m := fc.upstream()
	if string(m.Method) != "tools/call" || string(m.Name) != "echo" {
		t.Fatalf("backend got %s %s, want tools/call echo", m.Method, m.Name)
	}
	wire, ok := parseID(m.ID)
	if !ok || string(m.ProgressToken) != string(m.ID) {
		t.Fatalf("backend got id %s and progress token %s, want one numeric id for both", m.ID, m.ProgressToken)
	}
	fc.up.sink.Message([]byte(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":` + strconv.FormatUint(wire, 10) + `,"progress":1}}`))
	if p := fc.read(); string(p.Method) != "notifications/progress" || string(p.ProgressToken) != `"p1"` {
		t.Fatalf("client got %s with token %s, want progress with \"p1\"", p.Method, p.ProgressToken)
	}
	fc.answer(m.ID, `{"content":[]}`)
	if r := fc.read(); r.Kind != codec.KindResult || string(r.ID) != `"c1"` {
		t.Fatalf("client got kind %v id %s, want the result of \"c1\"", r.Kind, r.ID)
	}
	if n := fc.f.InFlight(); n != 0 {
		t.Fatalf("%d requests still in flight", n)
	}
	if got := fc.f.Stats.Forwarded.Load(); got != 1 {
		t.Fatalf("Forwarded = %d, want 1", got)
	}
}

// TestForwardCancel cancels a request the backend holds: the backend hears of it under
// its own id, the client gets no response, and a late answer goes nowhere.
func TestForwardCancel(t *testing.T) {
	fc := newFleetClient(t, time.Minute)
	fc.send(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"a__echo"}}`)
	m := fc.upstream()
	fc.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}}`)
	note := fc.upstream()
	if string(note.Method) != "notifications/cancelled" || string(note.RequestID) != string(m.ID) {
		t.Fatalf("backend got %s for %s, want notifications/cancelled for %s", note.Method, note.RequestID, m.ID)
	}
	if n := fc.f.InFlight(); n != 0 {
		t.Fatalf("%d requests still in flight", n)
	}
	fc.answer(m.ID, `{}`) // too late: dropped
	// The next line the client reads answers its next request.
	fc.send(`{"jsonrpc":"2.0","id":8,"method":"tools/list"}`)
	if r := fc.read(); string(r.ID) != "8" {
		t.Fatalf("client got a message for id %s, want only the answer to 8", r.ID)
	}
	if got := fc.f.Stats.Cancelled.Load(); got != 1 {
		t.Fatalf("Cancelled = %d, want 1", got)
	}
}

// TestForwardTimeout leaves a request unanswered by a backend whose Send returns at
// once (as on stdio): the sweeper settles it as expired, the client gets the timeout
// error, the backend a cancellation, and its late answer is dropped.
func TestForwardTimeout(t *testing.T) {
	fc := newFleetClient(t, 200*time.Millisecond)
	fc.send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"a__echo"}}`)
	m := fc.upstream()
	r := fc.read()
	if r.Kind != codec.KindError || string(r.ID) != "3" {
		t.Fatalf("client got kind %v for id %s, want an error for 3", r.Kind, r.ID)
	}
	if err := rpcErrorOf(r.Error).(*router.Error); err.Code != codec.CodeBackendTimeout {
		t.Fatalf("code %d (%s), want %d", err.Code, err.Message, codec.CodeBackendTimeout)
	}
	// The backend is told the router gave up, so that one that would never answer
	// does not keep the request.
	if c := fc.upstream(); string(c.Method) != "notifications/cancelled" || string(c.RequestID) != string(m.ID) {
		t.Fatalf("backend got %s (requestId %s) after the timeout, want notifications/cancelled of %s", c.Method, c.RequestID, m.ID)
	}
	fc.answer(m.ID, `{}`) // too late: dropped, and counted
	if got := fc.f.Stats.TimedOut.Load(); got != 1 {
		t.Fatalf("TimedOut = %d, want 1", got)
	}
	if got := fc.f.Stats.Unmatched.Load(); got != 1 {
		t.Fatalf("Unmatched = %d, want 1 (the late answer)", got)
	}
}

// TestAppendWire checks the bytes a backend sees for routed requests: id, prefix and
// progress token rewritten, the rest untouched, and an escaped name written anew; a
// stateless client's request to a 2025 backend (legacy) also loses the revision's
// _meta keys, in the same pass as the progress token among them.
func TestAppendWire(t *testing.T) {
	const v = `"io.modelcontextprotocol/protocolVersion":"2026-07-28"`
	const caps = `"io.modelcontextprotocol/clientCapabilities":{"sampling":{}}`
	// More runs of the revision's keys than one pass cuts: a second pass finishes.
	var many, manyKept strings.Builder
	for i := range 2*metaCuts + 3 {
		if i > 0 {
			many.WriteByte(',')
			manyKept.WriteByte(',')
		}
		k := `"k` + strconv.Itoa(i) + `":` + strconv.Itoa(i)
		many.WriteString(`"io.modelcontextprotocol/x` + strconv.Itoa(i) + `":{},` + k)
		manyKept.WriteString(k)
	}
	for _, tc := range []struct {
		in, want          string
		stateless, legacy bool
	}{
		{in: `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{` + many.String() + `,"progressToken":"t"}}}`,
			want: `{"jsonrpc":"2.0","id":42,"method":"tools/list","params":{"_meta":{` + manyKept.String() + `,"progressToken":42}}}`, stateless: true, legacy: true},
		{in: `{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":"a__echo"}}`,
			want: `{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"echo"}}`},
		{in: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a__echo","_meta":{"progressToken":"t"}}}`,
			want: `{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"echo","_meta":{"progressToken":42}}}`},
		{in: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a__\u0065cho"}}`,
			want: `{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"echo"}}`},
		// Stateless, to a 2025 backend: the revision's keys go, wherever they are.
		{in: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a__echo","_meta":{` + v + `,"progressToken":"t",` + caps + `,"x.example/k":"v"}}}`,
			want: `{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"echo","_meta":{"progressToken":42,"x.example/k":"v"}}}`, stateless: true, legacy: true},
		{in: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta": { "progressToken" : "t" , ` + v + ` , ` + caps + ` },"name":"a__echo"}}`,
			want: `{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"_meta": { "progressToken" : 42 },"name":"echo"}}`, stateless: true, legacy: true},
		{in: `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{` + v + `,` + caps + `}}}`,
			want: `{"jsonrpc":"2.0","id":42,"method":"tools/list","params":{"_meta":{}}}`, stateless: true, legacy: true},
		// Only the revision's keys (codec.MetaReserved): the inside goes, without a walk.
		{in: `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta": { ` + v + ` ,` + caps + "\n}}}",
			want: `{"jsonrpc":"2.0","id":42,"method":"tools/list","params":{"_meta": { ` + "\n}}}", stateless: true, legacy: true},
		{in: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{` + v + `},"name":"a__echo","progressToken":"t"}}`,
			want: `{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"_meta":{},"name":"echo","progressToken":42}}`, stateless: true, legacy: true},
		// An escaped key is not taken for one of the revision's, by either path.
		{in: `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol\/x":1,` + v + `}}}`,
			want: `{"jsonrpc":"2.0","id":42,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol\/x":1}}}`, stateless: true, legacy: true},
		{in: `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"a":1,` + v + `,"b":2,` + caps + `}}}`,
			want: `{"jsonrpc":"2.0","id":42,"method":"tools/list","params":{"_meta":{"a":1,"b":2}}}`, stateless: true, legacy: true},
		{in: `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`,
			want: `{"jsonrpc":"2.0","id":42,"method":"tools/list"}`, stateless: true, legacy: true},
		// Kept: to a 2026-07-28 backend, or from a session's client.
		{in: `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{` + v + `}}}`,
			want: `{"jsonrpc":"2.0","id":42,"method":"tools/list","params":{"_meta":{` + v + `}}}`, stateless: true},
		{in: `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{` + v + `}}}`,
			want: `{"jsonrpc":"2.0","id":42,"method":"tools/list","params":{"_meta":{` + v + `}}}`, legacy: true},
	} {
		x := &transport.Exchange{Raw: []byte(tc.in), Stateless: tc.stateless}
		if err := codec.Scan(x.Raw, &x.Msg); err != nil {
			t.Fatal(err)
		}
		e := &entry{kind: clientRequest, id: 42, x: x, strip: len("a__"), progress: x.Msg.ProgressToken != nil}
		got := appendWire(nil, e, tc.legacy)
		if string(got) != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.in, got, tc.want)
		}
		if !json.Valid(got) {
			t.Errorf("%s: not JSON", got)
		}
	}
}

// FuzzAppendWireMeta: a stateless request to a 2025 backend loses the same bytes
// whether its _meta is cut without a walk (codec.MetaReserved) or member by member
// (appendMetaCuts), and what is left is JSON.
func FuzzAppendWireMeta(f *testing.F) {
	const v = `"io.modelcontextprotocol/protocolVersion":"2026-07-28"`
	for _, meta := range []string{`{` + v + `}`, `{ ` + v + ` , "io.modelcontextprotocol/clientCapabilities":{} }`,
		`{"progressToken":1,` + v + `}`, `{"io.modelcontextprotocol\/x":1}`, `{}`, `{"io.modelcontextprotocol/":2}`, `{"a":{"io.modelcontextprotocol/b":1}}`} {
		f.Add(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a__echo","_meta":` + meta + `}}`)
	}
	f.Fuzz(func(t *testing.T, in string) {
		x := &transport.Exchange{Raw: []byte(in), Stateless: true}
		if codec.Scan(x.Raw, &x.Msg) != nil || x.Msg.Kind != codec.KindRequest {
			return
		}
		e := &entry{kind: clientRequest, id: 42, x: x, progress: x.Msg.ProgressToken != nil}
		got := appendWire(nil, e, true)
		reserved := x.Msg.Flags&codec.MetaReserved != 0
		x.Msg.Flags &^= codec.MetaReserved
		if walked := appendWire(nil, e, true); string(got) != string(walked) {
			t.Fatalf("%s (reserved %v):\n   cut %s\nwalked %s", in, reserved, got, walked)
		}
		if !json.Valid(got) {
			t.Fatalf("%s: not JSON: %s", in, got)
		}
	})
}
