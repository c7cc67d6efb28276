package router

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/internal/testio"
	"github.com/mcprouter/mcprouter/transport"
)

func TestMethodOf(t *testing.T) {
	for m := Method(0); m < NumMethods; m++ {
		name := m.String()
		if name == "" {
			t.Fatalf("method %d has no name", m)
		}
		if m == MethodOther {
			continue
		}
		if got := MethodOf([]byte(name)); got != m {
			t.Errorf("MethodOf(%q) = %v, want %v", name, got, m)
		}
	}
	for _, name := range []string{"", "tools/call ", "Tools/call", "notifications/initialized", "x/y", `tools\/call`} {
		if got := MethodOf([]byte(name)); got != MethodOther {
			t.Errorf("MethodOf(%q) = %v, want other", name, got)
		}
	}
	if got := Method(200).String(); got != "other" {
		t.Errorf("out of range method: %q", got)
	}
	if n := testing.AllocsPerRun(100, func() { MethodOf([]byte("resources/templates/list")) }); n != 0 {
		t.Errorf("MethodOf allocates %v times", n)
	}
}

func TestOutcomeString(t *testing.T) {
	want := map[Outcome]string{
		OutcomeOK: "ok", OutcomeError: "error", OutcomeTimeout: "timeout", OutcomeOverloaded: "overloaded",
		OutcomeUnavailable: "unavailable", OutcomeCancelled: "cancelled", Outcome(99): "error",
	}
	for o, s := range want {
		if o.String() != s {
			t.Errorf("%d: %q, want %q", o, o.String(), s)
		}
	}
	if len(want)-1 != int(NumOutcomes) {
		t.Errorf("table covers %d outcomes, NumOutcomes is %d", len(want)-1, NumOutcomes)
	}
}

func TestTraceParent(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	cases := []struct{ params, want string }{
		{`{"name":"x","_meta":{"traceparent":"` + tp + `"}}`, tp},
		{`{"_meta":{"progressToken":1,"traceparent":"` + tp + `","tracestate":"a=b"}}`, tp},
		{`{"_meta":{"traceparent":"a\"b"}}`, `a"b`}, // escapes decoded: it is only logged
		{`{"_meta":{"traceparent":7}}`, ""},         // not a string
		{`{"_meta":{}}`, ""},
		{`{"traceparent":"` + tp + `"}`, ""}, // only _meta counts
		{`{"_meta":"x"}`, ""},
		{`[1,2]`, ""},
		{``, ""},
		{`{"_meta":{"traceparent":"` + strings.Repeat("a", 600) + `"}}`, ""}, // too long to log
	}
	for _, c := range cases {
		if got := TraceParent([]byte(c.params)); got != c.want {
			t.Errorf("TraceParent(%s) = %q, want %q", c.params, got, c.want)
		}
	}
}

// observed is one RequestDone call.
type observed struct {
	method    string
	backend   int
	outcome   Outcome
	start     int64
	backendNs int64
}

type recorder struct {
	mu  sync.Mutex
	got []observed
}

func (r *recorder) RequestDone(x *transport.Exchange, backend int, o Outcome, start, backendNs int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, observed{string(x.Msg.Method), backend, o, start, backendNs})
}

func (r *recorder) FanOutDelivered(int64) {}

func (r *recorder) records() []observed {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]observed(nil), r.got...)
}

// startedFleet answers tools/call itself during Prepare and remembers what Started said.
type startedFleet struct {
	stubFleet
	started chan int64
}

func (f *startedFleet) AppendCapabilities(dst []byte, _ string) []byte { return dst }
func (f *startedFleet) Prepare(_ *Session, x *transport.Exchange) bool {
	if x.Msg.Kind == codec.KindRequest {
		f.started <- Started(x)
		x.Reply(codec.AppendResult(nil, x.Msg.ID, []byte(`{}`)))
		return false
	}
	x.Done()
	return false
}

// TestRouterObserves: every request the router answers itself reaches the Observer with
// its outcome, no backend and a start time, and the debug log lines of a request carry
// its traceparent.
func TestRouterObserves(t *testing.T) {
	rec := &recorder{}
	var logs testio.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	f := &startedFleet{started: make(chan int64, 1)}
	r, err := New(Config{Version: "test", Observer: rec, Logger: log, Fleet: f})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(t.Context()) })
	if r.Observer() == nil {
		t.Fatal("Observer() is nil with an observer configured")
	}
	h := newHTTPHarness(t, r, 10)
	sid := h.initialize(V20251125)
	h.post(sid, V20251125, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	h.post(sid, V20251125, `{"jsonrpc":"2.0","id":2,"method":"ping","params":{"_meta":{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}}}`)
	h.post(sid, V20251125, `{"jsonrpc":"2.0","id":3,"method":"logging/setLevel","params":{"level":"nope"}}`)
	h.post(sid, V20251125, `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"x"}}`)
	if s := <-f.started; s == 0 {
		t.Error("Started(x) is 0 during Fleet.Prepare")
	}

	got := rec.records()
	want := []struct {
		method  string
		outcome Outcome
	}{{"initialize", OutcomeOK}, {"ping", OutcomeOK}, {"logging/setLevel", OutcomeError}}
	if len(got) != len(want) { // the fleet answered tools/call without reporting it
		t.Fatalf("observed %d requests, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		g := got[i]
		if g.method != w.method || g.outcome != w.outcome || g.backend != NoBackend || g.start == 0 || g.backendNs != 0 {
			t.Errorf("request %d: %+v, want %s %s, no backend, a start time", i, g, w.method, w.outcome)
		}
	}
	out := logs.String()
	for _, line := range []string{`msg="request received" method=ping`, `msg="request done" method=ping`} {
		if !containsLine(out, line, "traceparent=00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01") {
			t.Errorf("no log line %q with the traceparent in:\n%s", line, out)
		}
	}
}

// TestRouterNoObserver: without an observer and with debug off, nothing is reported
// and no timestamps are taken.
func TestRouterNoObserver(t *testing.T) {
	log := slog.New(slog.NewTextHandler(&bytes.Buffer{}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	r, err := New(Config{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(t.Context())
	if r.Observer() != nil {
		t.Error("Observer() is not nil without observer or debug logging")
	}
}

func containsLine(out string, parts ...string) bool {
	for _, l := range strings.Split(out, "\n") {
		ok := true
		for _, p := range parts {
			if !strings.Contains(l, p) {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// FuzzTraceParent: TraceParent agrees with a reference written with encoding/json on
// every valid JSON object (the first "_meta", its first "traceparent", a string of at
// most 512 bytes), and on anything else gives a bounded string without a panic.
func FuzzTraceParent(f *testing.F) {
	for _, seed := range []string{
		`{"_meta":{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}`,
		`{"_meta":{"traceparent":"\u0030\n"}}`, `{"_meta":{"traceparent":1}}`, `{"_meta":`, `{`, `[]`, ``,
		`{"a":[{"_meta":1}],"_meta":{"x":{"traceparent":"no"},"traceparent":"yes"}}`,
		`{"_meta":{"traceparent":"a"},"_meta":{"traceparent":"b"}}`,
		`{"\u005fmeta":{"trace\u0070arent":"escaped keys"}}`,
		`{"_meta":{"traceparent":"\ud800 lone surrogate"}}`,
		`{"_meta":{"traceparent":"` + strings.Repeat("x", 513) + `"}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, params []byte) {
		tp := TraceParent(params)
		if len(tp) > 512 {
			t.Fatalf("%d bytes", len(tp))
		}
		if json.Valid(params) && utf8.Valid(params) {
			if want := refTraceParent(params); tp != want {
				t.Fatalf("TraceParent(%s) = %q, reference %q", params, tp, want)
			}
		}
	})
}

// refTraceParent is TraceParent written simply: params as the codec hands them (from
// their first byte) must be an object; its first "_meta" member must be an object
// whose first "traceparent" member is a string of at most 512 bytes.
func refTraceParent(params []byte) string {
	if len(params) == 0 || params[0] != '{' {
		return ""
	}
	meta, ok := firstMember(params, "_meta")
	if !ok {
		return ""
	}
	raw, ok := firstMember(meta, "traceparent")
	var s string
	if !ok || len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &s) != nil || len(s) > 512 {
		return ""
	}
	return s
}

// firstMember returns the value of the first member named key of a JSON object.
func firstMember(obj []byte, key string) (json.RawMessage, bool) {
	dec := json.NewDecoder(bytes.NewReader(obj))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, false
	}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return nil, false
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, false
		}
		if k == key {
			return v, true
		}
	}
	return nil, false
}
