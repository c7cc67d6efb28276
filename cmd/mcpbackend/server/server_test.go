package server

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/internal/testwait"
)

// TestGolden pins the exact replies of every method the server answers inline, for each
// protocol era.
func TestGolden(t *testing.T) {
	versions := []string{"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"}
	cases := []struct{ name, msg string }{
		{"ping", `{"jsonrpc":"2.0","id":1,"method":"ping"}`},
		{"tools_list", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`},
		{"resources_list", `{"jsonrpc":"2.0","id":1,"method":"resources/list"}`},
		{"templates_list", `{"jsonrpc":"2.0","id":1,"method":"resources/templates/list"}`},
		{"prompts_list", `{"jsonrpc":"2.0","id":1,"method":"prompts/list"}`},
		{"echo", `{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"echo","arguments":{"text":"h\u00e9\"\n"}}}`},
		{"echo_bad_args", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":42}}}`},
		{"payload", `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"payload","arguments":{"bytes":70}}}`},
		{"fail", `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"fail","arguments":{"message":"boom"}}}`},
		{"fail_rpc", `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"fail_rpc","arguments":{"message":"bad","code":-32042}}}`},
		{"unknown_tool", `{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"nope","arguments":{}}}`},
		{"touch", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"touch","arguments":{"uri":"memo://board"}}}`},
		{"read_listed", `{"jsonrpc":"2.0","id":8,"method":"resources/read","params":{"uri":"counter://tick"}}`},
		{"read_echo_template", `{"jsonrpc":"2.0","id":9,"method":"resources/read","params":{"uri":"echo://hello%20there"}}`},
		{"read_bytes_template", `{"jsonrpc":"2.0","id":10,"method":"resources/read","params":{"uri":"bytes://5"}}`},
		{"read_unknown", `{"jsonrpc":"2.0","id":11,"method":"resources/read","params":{"uri":"nope://x"}}`},
		{"prompt_greet", `{"jsonrpc":"2.0","id":12,"method":"prompts/get","params":{"name":"greet","arguments":{"name":"Grace","style":"formal"}}}`},
		{"prompt_missing_arg", `{"jsonrpc":"2.0","id":13,"method":"prompts/get","params":{"name":"greet"}}`},
		{"complete_prompt", `{"jsonrpc":"2.0","id":14,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"greet"},"argument":{"name":"name","value":"a"}}}`},
		{"complete_template", `{"jsonrpc":"2.0","id":15,"method":"completion/complete","params":{"ref":{"type":"ref/resource","uri":"echo://{text}"},"argument":{"name":"text","value":"HEL"}}}`},
		{"set_level", `{"jsonrpc":"2.0","id":16,"method":"logging/setLevel","params":{"level":"warning"}}`},
		{"set_level_bad", `{"jsonrpc":"2.0","id":17,"method":"logging/setLevel","params":{"level":"loud"}}`},
		{"unknown_method", `{"jsonrpc":"2.0","id":18,"method":"nope/nope"}`},
		{"initialize_again", `{"jsonrpc":"2.0","id":19,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`},
	}
	for _, v := range versions {
		for _, c := range cases {
			t.Run(v+"/"+c.name, func(t *testing.T) {
				s := newTestServer(t, Config{PageSize: 4})
				sess, _ := openSession(t, s, v, `{}`)
				checkGolden(t, v+"/"+c.name+".json", do(t, s, sess, c.msg).reply(t))
			})
		}
	}
}

func TestInitialize(t *testing.T) {
	cases := []struct {
		name, params, wantVersion string
		wantErr                   int
	}{
		{"latest", `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}`, "2025-11-25", 0},
		{"oldest", `{"protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{"name":"c","version":"1"}}`, "2024-11-05", 0},
		{"future offers latest", `{"protocolVersion":"2030-01-01","capabilities":{},"clientInfo":{"name":"c","version":"1"}}`, "2025-11-25", 0},
		{"no version", `{"capabilities":{},"clientInfo":{"name":"c","version":"1"}}`, "", codec.CodeInvalidParams},
		{"params not object", `[1]`, "", codec.CodeInvalidParams},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newTestServer(t, Config{})
			r := newRecorder()
			bound := false
			s.serveUninitialized(scan(t, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":`+c.params+`}`), r,
				func(string, *Session) (Sender, error) { bound = true; return newSender(), nil })
			var resp struct {
				Result struct {
					ProtocolVersion string `json:"protocolVersion"`
				} `json:"result"`
				Error *struct{ Code int } `json:"error"`
			}
			if err := json.Unmarshal(r.reply(t), &resp); err != nil {
				t.Fatal(err)
			}
			if c.wantErr != 0 {
				if resp.Error == nil || resp.Error.Code != c.wantErr || bound {
					t.Fatalf("want error %d and no session, got %+v bound=%v", c.wantErr, resp.Error, bound)
				}
				return
			}
			if resp.Result.ProtocolVersion != c.wantVersion || !bound {
				t.Fatalf("negotiated %q (bound %v), want %q", resp.Result.ProtocolVersion, bound, c.wantVersion)
			}
		})
	}
}

func TestUninitialized(t *testing.T) {
	s := newTestServer(t, Config{})
	cases := []struct {
		msg      string
		wantCode int // 0: result; -1: no reply (Done)
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"ping"}`, 0},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, codec.CodeInvalidRequest},
		{`{"jsonrpc":"2.0","id":1,"method":"server/discover"}`, codec.CodeMethodNotFound},
		{`{"jsonrpc":"2.0","method":"notifications/initialized"}`, -1},
		{`{"jsonrpc":"2.0","id":1,"result":{}}`, -1},
	}
	for _, c := range cases {
		r := newRecorder()
		s.serveUninitialized(scan(t, c.msg), r, func(string, *Session) (Sender, error) {
			t.Fatal("bind called")
			return nil, nil
		})
		r.wait(t)
		if c.wantCode == -1 {
			if r.dones != 1 || len(r.replies) != 0 {
				t.Errorf("%s: want Done only", c.msg)
			}
			continue
		}
		code := errorCode(t, r.reply(t))
		if code != c.wantCode {
			t.Errorf("%s: error code %d, want %d", c.msg, code, c.wantCode)
		}
	}
}

// errorCode returns the error code of a response, 0 for a result.
func errorCode(t testing.TB, msg []byte) int {
	t.Helper()
	var resp struct {
		Error *struct{ Code int } `json:"error"`
	}
	if err := json.Unmarshal(msg, &resp); err != nil {
		t.Fatalf("not JSON: %v: %s", err, msg)
	}
	if resp.Error == nil {
		return 0
	}
	return resp.Error.Code
}

func TestPagination(t *testing.T) {
	for _, total := range []int{0, 1, 49, 50, 51, 120} {
		t.Run(strconv.Itoa(total), func(t *testing.T) {
			s := newTestServer(t, Config{ExtraTools: total, PageSize: 50})
			sess, _ := openSession(t, s, "2025-06-18", `{}`)
			want := len(builtinTools) + total
			var names []string
			cursor := ""
			for page := 0; page < 100; page++ {
				params := `{}`
				if cursor != "" {
					params = `{"cursor":` + strconv.Quote(cursor) + `}`
				}
				var res struct {
					Result struct {
						Tools      []struct{ Name string }
						NextCursor string
					}
				}
				if err := json.Unmarshal(do(t, s, sess, `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":`+params+`}`).reply(t), &res); err != nil {
					t.Fatal(err)
				}
				if len(res.Result.Tools) > 50 {
					t.Fatalf("page of %d tools, page size 50", len(res.Result.Tools))
				}
				for _, tl := range res.Result.Tools {
					names = append(names, tl.Name)
				}
				if cursor = res.Result.NextCursor; cursor == "" {
					break
				}
			}
			if len(names) != want {
				t.Fatalf("listed %d tools, want %d", len(names), want)
			}
			seen := map[string]bool{}
			for _, n := range names {
				if seen[n] {
					t.Fatalf("tool %s listed twice", n)
				}
				seen[n] = true
			}
			if total > 0 && !seen["tool_0001"] {
				t.Fatal("tool_0001 not listed")
			}
		})
	}
}

func TestInvalidCursor(t *testing.T) {
	s := newTestServer(t, Config{ExtraTools: 10, PageSize: 5})
	sess, _ := openSession(t, s, "2025-11-25", `{}`)
	resourcesCursor := string(appendCursor(nil, "r", 1))
	for _, c := range []string{"", "x", "!!!", resourcesCursor, string(appendCursor(nil, "t", 999)), string(appendCursor(nil, "t", -1))} {
		msg := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"cursor":` + strconv.Quote(c) + `}}`
		if code := errorCode(t, do(t, s, sess, msg).reply(t)); code != codec.CodeInvalidParams {
			t.Errorf("cursor %q: code %d, want %d", c, code, codec.CodeInvalidParams)
		}
	}
	// An escaped cursor is decoded before use.
	good := string(appendCursor(nil, "t", 5))
	esc := `\u00` + strconv.FormatInt(int64(good[0]), 16) + good[1:]
	msg := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"cursor":"` + esc + `"}}`
	if code := errorCode(t, do(t, s, sess, msg).reply(t)); code != 0 {
		t.Errorf("escaped cursor: code %d", code)
	}
}

func TestCursorRoundTrip(t *testing.T) {
	for _, kind := range []string{"t", "r", "rt", "p"} {
		for _, off := range []int{0, 1, 50, 999999} {
			c := appendCursor(nil, kind, off)
			got, ok := parseCursor(c, kind, 1_000_000)
			if !ok || got != off {
				t.Errorf("cursor %s of %s:%d parsed as %d, %v", c, kind, off, got, ok)
			}
		}
	}
}

func TestSleepAndCancel(t *testing.T) {
	s := newTestServer(t, Config{})
	sess, _ := openSession(t, s, "2025-06-18", `{}`)

	// A short sleep completes with a reply.
	r := do(t, s, sess, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"sleep","arguments":{"ms":1}}}`)
	if !strings.Contains(string(r.reply(t)), `"sleptMs":1`) {
		t.Fatalf("sleep reply: %s", r.replies[0])
	}

	// A long one is cancelled: Done, no reply, nothing after.
	r = do(t, s, sess, `{"jsonrpc":"2.0","id":"long","method":"tools/call","params":{"name":"sleep","arguments":{"ms":600000}}}`)
	if s.inflight.Load() != 1 {
		t.Fatalf("in flight %d, want 1", s.inflight.Load())
	}
	// A cancel for another id changes nothing.
	do(t, s, sess, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"other"}}`).wait(t)
	if r.isEnded() {
		t.Fatal("unrelated cancel ended the call")
	}
	do(t, s, sess, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"long","reason":"test"}}`).wait(t)
	r.wait(t)
	if r.dones != 1 || len(r.replies) != 0 {
		t.Fatalf("cancelled call: %d replies, %d dones", len(r.replies), r.dones)
	}
	if s.inflight.Load() != 0 || s.Stats.Cancelled.Load() != 1 {
		t.Fatalf("in flight %d, cancelled %d", s.inflight.Load(), s.Stats.Cancelled.Load())
	}
	// Cancelling again is a no-op.
	do(t, s, sess, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"long"}}`).wait(t)
	if r.afterEnd != 0 || s.Stats.Cancelled.Load() != 1 {
		t.Fatal("second cancel acted")
	}
}

func TestProgress(t *testing.T) {
	s := newTestServer(t, Config{})
	for _, v := range []string{"2024-11-05", "2025-11-25"} {
		sess, _ := openSession(t, s, v, `{}`)
		do(t, s, sess, `{"jsonrpc":"2.0","id":0,"method":"logging/setLevel","params":{"level":"debug"}}`).reply(t)
		r := do(t, s, sess, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"progress","arguments":{"steps":3,"intervalMs":0},"_meta":{"progressToken":42}}}`)
		r.reply(t)
		var progress, logs int
		for i, m := range r.sent() {
			var n struct {
				Method string
				Params struct {
					ProgressToken json.RawMessage
					Progress      int
					Total         int
					Message       *string
				}
			}
			if err := json.Unmarshal(m, &n); err != nil {
				t.Fatalf("sent %d not JSON: %s", i, m)
			}
			switch n.Method {
			case "notifications/progress":
				progress++
				if string(n.Params.ProgressToken) != "42" || n.Params.Progress != progress || n.Params.Total != 3 {
					t.Errorf("progress %d: %s", progress, m)
				}
				if (n.Params.Message != nil) != (v >= "2025-03-26") {
					t.Errorf("%s: progress message presence wrong: %s", v, m)
				}
			case "notifications/message":
				logs++
			}
		}
		if progress != 3 || logs != 3 {
			t.Fatalf("%s: %d progress notifications and %d logs, want 3 and 3", v, progress, logs)
		}
	}
}

func TestProgressCancel(t *testing.T) {
	s := newTestServer(t, Config{})
	sess, _ := openSession(t, s, "2025-06-18", `{}`)
	r := do(t, s, sess, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"progress","arguments":{"steps":100,"intervalMs":1000},"_meta":{"progressToken":"t"}}}`)
	do(t, s, sess, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}}`).wait(t)
	r.wait(t)
	if r.dones != 1 || len(r.replies) != 0 || r.afterEnd != 0 {
		t.Fatalf("%d replies, %d dones, %d late", len(r.replies), r.dones, r.afterEnd)
	}
}

func TestSampling(t *testing.T) {
	s := newTestServer(t, Config{})
	sess, out := openSession(t, s, "2025-06-18", `{"sampling":{}}`)

	r := do(t, s, sess, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"sample","arguments":{"prompt":"say hi"}}}`)
	sent := r.sent()
	if len(sent) != 1 {
		t.Fatalf("want the sampling request sent on the call, got %d messages", len(sent))
	}
	var req codec.Message
	if err := codec.Scan(sent[0], &req); err != nil || req.Kind != codec.KindRequest || string(req.Method) != "sampling/createMessage" {
		t.Fatalf("sampling request: %v %s", err, sent[0])
	}
	if got := string(path(req.Params, "messages")); !strings.Contains(got, `"text":"say hi"`) {
		t.Fatalf("sampling request params: %s", req.Params)
	}
	// A response with another id is ignored; the right one completes the call.
	do(t, s, sess, `{"jsonrpc":"2.0","id":"someone-else","result":{}}`).wait(t)
	if r.isEnded() {
		t.Fatal("unrelated response completed the call")
	}
	answer := `{"jsonrpc":"2.0","id":` + string(req.ID) + `,"result":{"role":"assistant","content":{"type":"text","text":"hi \"there\""},"model":"m"}}`
	do(t, s, sess, answer).wait(t)
	got := string(r.reply(t))
	if !strings.Contains(got, `"text":"hi \"there\""`) || !strings.Contains(got, `"structuredContent"`) {
		t.Fatalf("sample reply: %s", got)
	}
	// A duplicate answer is dropped.
	do(t, s, sess, answer).wait(t)
	if r.afterEnd != 0 {
		t.Fatal("duplicate answer reached the exchange")
	}

	// Array content (2025-11-25) and an error answer.
	r = do(t, s, sess, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"sample","arguments":{"prompt":"p"}}}`)
	codec.Scan(r.sent()[0], &req)
	do(t, s, sess, `{"jsonrpc":"2.0","id":`+string(req.ID)+`,"result":{"role":"assistant","content":[{"type":"image","data":"","mimeType":"image/png"},{"type":"text","text":"second"}],"model":"m"}}`).wait(t)
	if got := string(r.reply(t)); !strings.Contains(got, `"text":"second"`) {
		t.Fatalf("array content: %s", got)
	}
	r = do(t, s, sess, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"sample","arguments":{"prompt":"p"}}}`)
	codec.Scan(r.sent()[0], &req)
	do(t, s, sess, `{"jsonrpc":"2.0","id":`+string(req.ID)+`,"error":{"code":-1,"message":"user said no"}}`).wait(t)
	if got := string(r.reply(t)); !strings.Contains(got, `"isError":true`) || !strings.Contains(got, "user said no") {
		t.Fatalf("error answer: %s", got)
	}

	// Cancelling the call forgets the request and tells the client.
	r = do(t, s, sess, `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"sample","arguments":{"prompt":"p"}}}`)
	codec.Scan(r.sent()[0], &req)
	do(t, s, sess, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":4}}`).wait(t)
	r.wait(t)
	if r.dones != 1 {
		t.Fatal("cancelled sample was not Done")
	}
	found := false
	for _, m := range out.messages() {
		if strings.Contains(string(m), `"notifications/cancelled"`) && strings.Contains(string(m), string(req.ID)) {
			found = true
		}
	}
	if !found {
		t.Fatal("client not told that the sampling request was cancelled")
	}
	if s.inflight.Load() != 0 {
		t.Fatalf("in flight %d", s.inflight.Load())
	}
}

func TestSamplingTimeoutAndUnsupported(t *testing.T) {
	s := newTestServer(t, Config{SampleTimeout: time.Millisecond})
	sess, _ := openSession(t, s, "2025-06-18", `{"sampling":{}}`)
	r := do(t, s, sess, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"sample","arguments":{"prompt":"p"}}}`)
	if got := string(r.reply(t)); !strings.Contains(got, `"isError":true`) || !strings.Contains(got, "did not answer") {
		t.Fatalf("timeout: %s", got)
	}
	plain, _ := openSession(t, s, "2025-06-18", `{}`)
	r = do(t, s, plain, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"sample","arguments":{"prompt":"p"}}}`)
	if got := string(r.reply(t)); !strings.Contains(got, "sampling capability") || len(r.sent()) != 0 {
		t.Fatalf("unsupported: %s", got)
	}
}

func TestSubscriptions(t *testing.T) {
	s := newTestServer(t, Config{ExtraResources: 3})
	a, outA := openSession(t, s, "2025-06-18", `{}`)
	b, outB := openSession(t, s, "2024-11-05", `{}`)
	for _, c := range []struct {
		sess *Session
		uri  string
	}{{a, "memo://board"}, {b, "memo://board"}, {a, "item://0002"}} {
		if code := errorCode(t, do(t, s, c.sess, `{"jsonrpc":"2.0","id":1,"method":"resources/subscribe","params":{"uri":"`+c.uri+`"}}`).reply(t)); code != 0 {
			t.Fatalf("subscribe %s: %d", c.uri, code)
		}
	}
	if code := errorCode(t, do(t, s, a, `{"jsonrpc":"2.0","id":1,"method":"resources/subscribe","params":{"uri":"nope://x"}}`).reply(t)); code != codec.CodeResourceNotFound {
		t.Fatalf("subscribe unknown: %d", code)
	}
	do(t, s, a, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"touch","arguments":{"uri":"memo://board"}}}`).reply(t)
	do(t, s, a, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"touch","arguments":{"uri":"item://0002"}}}`).reply(t)
	want := func(out *sender, uris ...string) {
		t.Helper()
		msgs := out.messages()
		if len(msgs) != len(uris) {
			t.Fatalf("got %d notifications, want %d: %q", len(msgs), len(uris), msgs)
		}
		for i, u := range uris {
			if string(msgs[i]) != `{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"`+u+`"}}` {
				t.Errorf("notification %d: %s", i, msgs[i])
			}
		}
	}
	want(outA, "memo://board", "item://0002")
	want(outB, "memo://board")

	// Unsubscribe and session close both stop the notifications.
	do(t, s, a, `{"jsonrpc":"2.0","id":4,"method":"resources/unsubscribe","params":{"uri":"memo://board"}}`).reply(t)
	s.CloseSession(b)
	do(t, s, a, `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"touch","arguments":{"uri":"memo://board"}}}`).reply(t)
	want(outA, "memo://board", "item://0002")
	want(outB, "memo://board")
	s.subMu.Lock()
	n := len(s.subs)
	s.subMu.Unlock()
	if n != 1 { // item://0002 for a
		t.Fatalf("%d subscribed URIs left, want 1", n)
	}
	// A closed session cannot subscribe again.
	do(t, s, b, `{"jsonrpc":"2.0","id":6,"method":"resources/subscribe","params":{"uri":"memo://board"}}`).reply(t)
	s.subMu.Lock()
	_, leaked := s.subs["memo://board"]
	s.subMu.Unlock()
	if leaked {
		t.Fatal("closed session subscribed")
	}
}

func TestTicker(t *testing.T) {
	s := newTestServer(t, Config{Tick: time.Millisecond})
	sess, out := openSession(t, s, "2025-06-18", `{}`)
	do(t, s, sess, `{"jsonrpc":"2.0","id":1,"method":"resources/subscribe","params":{"uri":"counter://tick"}}`).reply(t)
	for i := 0; i < 2; i++ {
		select {
		case <-out.notify:
		case <-time.After(waitLimit):
			t.Fatal("no tick notification")
		}
	}
	if !strings.Contains(string(out.messages()[0]), "counter://tick") {
		t.Fatalf("notification: %s", out.messages()[0])
	}
}

func TestLogTool(t *testing.T) {
	s := newTestServer(t, Config{Name: "b1"})
	sess, _ := openSession(t, s, "2025-06-18", `{}`)
	cases := []struct {
		session, tool string
		wantLogs      int
	}{
		{"", "info", 1}, // default session level is info
		{"", "debug", 0},
		{"error", "warning", 0},
		{"error", "critical", 1},
	}
	for _, c := range cases {
		if c.session != "" {
			do(t, s, sess, `{"jsonrpc":"2.0","id":1,"method":"logging/setLevel","params":{"level":"`+c.session+`"}}`).reply(t)
		}
		r := do(t, s, sess, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"log","arguments":{"level":"`+c.tool+`","message":"hello"}}}`)
		r.reply(t)
		if got := len(r.sent()); got != c.wantLogs {
			t.Errorf("session %q tool %q: %d logs, want %d", c.session, c.tool, got, c.wantLogs)
		}
		if c.wantLogs == 1 {
			want := `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"` + c.tool + `","logger":"b1","data":"hello"}}`
			if got := string(r.sent()[0]); got != want {
				t.Errorf("log: %s", got)
			}
		}
	}
}

func TestOverload(t *testing.T) {
	s := newTestServer(t, Config{MaxInFlight: 2})
	sess, _ := openSession(t, s, "2025-06-18", `{}`)
	long := func(id int) *recorder {
		return do(t, s, sess, `{"jsonrpc":"2.0","id":`+strconv.Itoa(id)+`,"method":"tools/call","params":{"name":"sleep","arguments":{"ms":600000}}}`)
	}
	rs := []*recorder{long(0)}
	// A duplicate id of a call in flight is refused, and does not disturb the first.
	if code := errorCode(t, long(0).reply(t)); code != codec.CodeInvalidRequest {
		t.Fatalf("duplicate id: code %d", code)
	}
	rs = append(rs, long(1))
	if code := errorCode(t, long(2).reply(t)); code != codec.CodeOverloaded {
		t.Fatalf("third call: code %d, want overload", code)
	}
	if rs[0].isEnded() || rs[1].isEnded() || s.Stats.Overload.Load() != 1 {
		t.Fatal("calls in flight disturbed")
	}
	// Closing the session ends the calls in flight without replies.
	s.CloseSession(sess)
	for _, r := range rs[:2] {
		r.wait(t)
		if r.dones != 1 || len(r.replies) != 0 {
			t.Fatalf("after close: %d replies, %d dones", len(r.replies), r.dones)
		}
	}
	if s.inflight.Load() != 0 {
		t.Fatalf("in flight %d", s.inflight.Load())
	}
	// A call on a closed session ends without a reply.
	r := do(t, s, sess, `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"sleep","arguments":{"ms":1}}}`)
	r.wait(t)
	if r.dones != 1 {
		t.Fatal("call on closed session answered")
	}
}

func TestShutdownRequest(t *testing.T) {
	s := newTestServer(t, Config{})
	sess, out := openSession(t, s, "2025-06-18", `{}`)
	if got := string(do(t, s, sess, `{"jsonrpc":"2.0","id":1,"method":"shutdown"}`).reply(t)); got != `{"jsonrpc":"2.0","id":1,"result":{}}` {
		t.Fatalf("shutdown: %s", got)
	}
	testwait.For(t, "the session to close after shutdown", waitLimit, func() bool {
		out.mu.Lock()
		defer out.mu.Unlock()
		return out.closed == 1
	})
}

func TestArgumentValidation(t *testing.T) {
	s := newTestServer(t, Config{MaxPayload: 100, MaxSleep: time.Second})
	sess, _ := openSession(t, s, "2025-06-18", `{}`)
	bad := []string{
		`{"name":"echo"}`,
		`{"name":"echo","arguments":{"text":null}}`,
		`{"name":"sleep","arguments":{}}`,
		`{"name":"sleep","arguments":{"ms":-1}}`,
		`{"name":"sleep","arguments":{"ms":1.5}}`,
		`{"name":"sleep","arguments":{"ms":2000}}`,
		`{"name":"payload","arguments":{"bytes":101}}`,
		`{"name":"payload","arguments":{"bytes":"10"}}`,
		`{"name":"progress","arguments":{"steps":0}}`,
		`{"name":"progress","arguments":{"steps":100,"intervalMs":100}}`,
		`{"name":"touch","arguments":{"uri":"nope://"}}`,
		`{"name":"log","arguments":{"level":"loud","message":"x"}}`,
		`{"name":"log","arguments":{}}`,
		`{"name":"sample","arguments":{"prompt":1}}`,
	}
	for _, p := range bad {
		got := string(do(t, s, sess, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":`+p+`}`).reply(t))
		if !strings.Contains(got, `"isError":true`) {
			t.Errorf("%s: want a tool error, got %s", p, got)
		}
	}
	if s.inflight.Load() != 0 {
		t.Fatalf("in flight %d", s.inflight.Load())
	}
	// No name at all is a protocol error.
	if code := errorCode(t, do(t, s, sess, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}`).reply(t)); code != codec.CodeInvalidParams {
		t.Fatalf("no name: %d", code)
	}
	// An escaped tool name is decoded.
	if got := string(do(t, s, sess, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"\u0065cho","arguments":{"text":"x"}}}`).reply(t)); !strings.Contains(got, `"text":"x"`) {
		t.Fatalf("escaped name: %s", got)
	}
}

func TestConfigValidate(t *testing.T) {
	bad := []Config{
		{ExtraTools: -1},
		{ExtraResources: maxExtra + 1},
		{PageSize: -5},
		{PageSize: maxPageSize + 1},
		{Tick: time.Microsecond},
		{MaxInFlight: -1},
		{MaxSleep: -time.Second},
		{MaxPayload: -1},
	}
	for _, c := range bad {
		if _, err := New(c); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
}
