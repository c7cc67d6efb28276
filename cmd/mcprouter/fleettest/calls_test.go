package fleettest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/mcprouter/mcprouter/internal/ctxtime"
	"github.com/mcprouter/mcprouter/internal/mcpraw"
	"github.com/mcprouter/mcprouter/internal/testwait"
)

// loggerOK reports whether a log message's logger names backend b (a replica of pair
// names itself pair-a or pair-b).
func loggerOK(b, logger string) bool {
	if b == pairName {
		return logger == pairName+"-a" || logger == pairName+"-b"
	}
	return logger == b
}

// TestCallsRouteToTheirBackend calls each backend's tools through the router with both
// clients (the Go SDK over Streamable HTTP and over legacy SSE, mcp-go) and checks who
// answered: the log tool's message names the backend process that ran it, the HTTP
// backends' own call counters move by exactly the calls routed to them, the replicas of
// pair share the calls, and errors keep their meaning (a backend's JSON-RPC error
// passes through, unknown tools are the router's -32602).
func TestCallsRouteToTheirBackend(t *testing.T) {
	f := startFleet(t)
	direct := map[string]*statsReader{
		bigName: readStatsOf(t, f.big), oldName: readStatsOf(t, f.old),
		pairName + "-a": readStatsOf(t, f.pair[0]), pairName + "-b": readStatsOf(t, f.pair[1]),
	}
	calls := func() map[string]uint64 {
		out := map[string]uint64{}
		for name, r := range direct {
			s, err := r.read()
			if err != nil {
				t.Fatalf("stats of %s: %v", name, err)
			}
			out[name] = s.Calls
		}
		return out
	}
	before := calls()
	routed := map[string]uint64{} // calls made per backend
	pairServed := map[string]int{}

	checkLog := func(t *testing.T, ev *events, b, marker string) {
		t.Helper()
		var got []string
		if !testwait.Poll(wait, func() bool { got = ev.loggersOf(marker); return len(got) > 0 }) {
			t.Fatalf("%s__log: no log message %q reached the client within %v", b, marker, wait)
		}
		if len(got) != 1 || !loggerOK(b, got[0]) {
			t.Fatalf("%s__log: log message %q came from %v, want one from %s", b, marker, got, b)
		}
		if b == pairName {
			pairServed[got[0]]++
		}
	}

	for _, o := range []clientOptions{{}, {sse: true}} {
		name := "go-sdk-streamable"
		if o.sse {
			name = "go-sdk-sse"
		}
		t.Run(name, func(t *testing.T) {
			c := connectSDK(t, f, o)
			for _, b := range backendNames {
				n := 1
				if b == pairName {
					n = 12 // enough to see both replicas serve
				}
				for i := 0; i < n; i++ {
					marker := fmt.Sprintf("%s-%s-%d", name, b, i)
					if got := c.mustText(t, b+"__log", map[string]any{"message": marker, "level": "notice"}); got != "logged at notice" {
						t.Errorf("%s__log answered %q", b, got)
					}
					checkLog(t, &c.events, b, marker)
					routed[b]++
				}
				text := "hello " + b
				if got := c.mustText(t, b+"__echo", map[string]any{"text": text}); got != text {
					t.Errorf("%s__echo answered %q, want %q", b, got, text)
				}
				routed[b]++
			}
			// big's generated tools are big's alone.
			if got := c.mustText(t, "big__tool_0230", map[string]any{"text": "deep"}); got != "deep" {
				t.Errorf("big__tool_0230 answered %q", got)
			}
			routed[bigName]++

			// A backend's JSON-RPC error reaches the client unchanged.
			_, err := c.call("old__fail_rpc", map[string]any{"message": "no luck", "code": -32042})
			if code := rpcCode(err); code != -32042 || !strings.Contains(fmt.Sprint(err), "no luck") {
				t.Errorf("old__fail_rpc: error %v (code %d), want the backend's -32042 \"no luck\"", err, code)
			}
			routed[oldName]++
			// Tool errors are results.
			res, err := c.call("kids__fail", map[string]any{"message": "as asked"})
			if err != nil || !res.IsError || sdkText(res) != "as asked" {
				t.Errorf("kids__fail: %v %+v, want an isError result", err, res)
			}
			routed[kidsName]++
			// Names the router does not know are its own -32602, never forwarded.
			for _, unknown := range []string{"big__no_such_tool", "nobody__echo", "echo", "big__"} {
				_, err := c.call(unknown, map[string]any{"text": "x"})
				if code := rpcCode(err); code != -32602 {
					t.Errorf("%s: error %v (code %d), want -32602", unknown, err, code)
				}
			}
		})
	}

	t.Run("mcp-go", func(t *testing.T) {
		c := connectMCPGo(t, f, clientOptions{})
		for _, b := range backendNames {
			n := 1
			if b == pairName {
				n = 12
			}
			for i := 0; i < n; i++ {
				marker := fmt.Sprintf("mcp-go-%s-%d", b, i)
				res, err := c.call(b+"__log", map[string]any{"message": marker, "level": "notice"}, nil)
				if err != nil || res.IsError {
					t.Fatalf("%s__log: %v %+v", b, err, res)
				}
				checkLog(t, &c.events, b, marker)
				routed[b]++
			}
			text := "hola " + b
			res, err := c.call(b+"__echo", map[string]any{"text": text}, nil)
			if err != nil || res.IsError || mcpgoText(res) != text {
				t.Errorf("%s__echo: %v %+v, want %q", b, err, res, text)
			}
			routed[b]++
		}
	})

	// Every call routed to an HTTP backend was run there, and nowhere else.
	after := calls()
	pairCalls := after[pairName+"-a"] - before[pairName+"-a"] + after[pairName+"-b"] - before[pairName+"-b"]
	if got := after[bigName] - before[bigName]; got != routed[bigName] {
		t.Errorf("big ran %d calls, want %d", got, routed[bigName])
	}
	if got := after[oldName] - before[oldName]; got != routed[oldName] {
		t.Errorf("old ran %d calls, want %d", got, routed[oldName])
	}
	if pairCalls != routed[pairName] {
		t.Errorf("pair's replicas ran %d calls, want %d", pairCalls, routed[pairName])
	}
	if pairServed[pairName+"-a"] == 0 || pairServed[pairName+"-b"] == 0 {
		t.Errorf("pair's log calls were served %v: one replica took no traffic", pairServed)
	}
}

// TestSameIDsManySessions runs many sessions at once, Go SDK and mcp-go, every one
// numbering its requests from 1, each with many calls in flight to every backend: every
// answer must be the one for its own request (echo returns the text sent, sleep the
// duration asked), so ids that collide across sessions never cross.
func TestSameIDsManySessions(t *testing.T) { testSameIDsManySessions(t, startFleet(t)) }

func testSameIDsManySessions(t *testing.T, f *fleet) {
	const (
		sdkSessions   = 10
		mcpgoSessions = 6
		inFlight      = 12 // concurrent calls per session
		rounds        = 2
	)
	var wg sync.WaitGroup
	errs := make(chan error, (sdkSessions+mcpgoSessions)*inFlight*rounds*2)
	type caller func(tool string, args map[string]any) (text string, sleptMs float64, err error)
	run := func(session string, call caller) {
		defer wg.Done()
		var inner sync.WaitGroup
		for j := 0; j < inFlight; j++ {
			inner.Add(1)
			go func() {
				defer inner.Done()
				for r := 0; r < rounds; r++ {
					b := backendNames[(j+r)%len(backendNames)]
					text := fmt.Sprintf("%s/%d/%d/%s", session, j, r, b)
					got, _, err := call(b+"__echo", map[string]any{"text": text})
					if err != nil {
						errs <- fmt.Errorf("%s: %s__echo: %v", session, b, err)
					} else if got != text {
						errs <- fmt.Errorf("%s: %s__echo(%q) answered %q: an answer crossed sessions", session, b, text, got)
					}
					ms := 5 * ((j + r) % 8)
					_, slept, err := call(b+"__sleep", map[string]any{"ms": ms})
					if err != nil {
						errs <- fmt.Errorf("%s: %s__sleep: %v", session, b, err)
					} else if slept != float64(ms) {
						errs <- fmt.Errorf("%s: %s__sleep(%d) answered sleptMs %v: an answer crossed requests", session, b, ms, slept)
					}
				}
			}()
		}
		inner.Wait()
	}
	for i := 0; i < sdkSessions; i++ {
		c := connectSDK(t, f, clientOptions{})
		wg.Add(1)
		go run(fmt.Sprintf("sdk%d", i), func(tool string, args map[string]any) (string, float64, error) {
			res, err := c.call(tool, args)
			if err != nil {
				return "", 0, err
			}
			return slept(res.IsError, sdkText(res), res.StructuredContent)
		})
	}
	for i := 0; i < mcpgoSessions; i++ {
		c := connectMCPGo(t, f, clientOptions{})
		wg.Add(1)
		go run(fmt.Sprintf("mcpgo%d", i), func(tool string, args map[string]any) (string, float64, error) {
			res, err := c.call(tool, args, nil)
			if err != nil {
				return "", 0, err
			}
			return slept(res.IsError, mcpgoText(res), res.StructuredContent)
		})
	}
	if !ctxtime.WaitGroup(&wg, 2*wait) {
		t.Fatalf("the sessions did not finish within %v", 2*wait)
	}
	close(errs)
	n := 0
	for err := range errs {
		if n++; n <= 10 {
			t.Error(err)
		}
	}
	if n > 10 {
		t.Errorf("... %d errors in all", n)
	}
	if !testwait.Poll(wait, func() bool { return f.metric("mcprouter_backend_in_flight_requests") == 0 }) {
		t.Errorf("requests still in flight in the router after every call returned")
	}
}

// slept reads a tool's answer, as either client gives it: its text and the sleptMs of
// its structured content, or the tool's error.
func slept(isError bool, text string, structuredContent any) (string, float64, error) {
	if isError {
		return "", 0, fmt.Errorf("tool error %s", text)
	}
	var st struct{ SleptMs float64 }
	structured(structuredContent, &st)
	return text, st.SleptMs, nil
}

// TestSameIDsRaw sends, in several sessions at once, requests whose ids differ only in
// JSON type (7 and "7") within a session and are the same across sessions: each must be
// answered with its own id token, byte for byte, and its own result (each call sleeps a
// different time, which its result states).
func TestSameIDsRaw(t *testing.T) {
	f := startFleet(t)
	ids := []string{`7`, `"7"`, `"seven"`, `-1`, `0`, `9007199254740993`}
	const sessions = 3
	var wg sync.WaitGroup
	errs := make(chan error, sessions*len(ids))
	for s := 0; s < sessions; s++ {
		rs := newRawSession(t, f)
		for k, id := range ids {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// Every call is in flight with all the others; ms tells them apart.
				ms := 300 + 10*(s*len(ids)+k)
				msgs, err := rs.post(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":"%s__sleep","arguments":{"ms":%d}}}`,
					id, backendNames[k%len(backendNames)], ms))
				if err != nil {
					errs <- fmt.Errorf("session %d id %s: %v", s, id, err)
					return
				}
				if len(msgs) == 0 {
					errs <- fmt.Errorf("session %d id %s: no response", s, id)
					return
				}
				resp := msgs[len(msgs)-1]
				if got := string(resp["id"]); got != id {
					errs <- fmt.Errorf("session %d: request with id %s was answered with id %s", s, id, got)
				}
				var res struct {
					StructuredContent struct{ SleptMs int } `json:"structuredContent"`
				}
				if err := json.Unmarshal(resp["result"], &res); err != nil || res.StructuredContent.SleptMs != ms {
					errs <- fmt.Errorf("session %d id %s: result %s, want sleptMs %d", s, id, resp["result"], ms)
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// rawSession is a Streamable HTTP session driven by hand (mcpraw), to control ids
// exactly.
type rawSession struct {
	mcpraw.Client
}

func newRawSession(t *testing.T, f *fleet) *rawSession { return newRawSessionWith(t, f, `{}`) }

// newRawSessionWith opens a raw session that declares the client capabilities caps
// (raw JSON).
func newRawSessionWith(t *testing.T, f *fleet, caps string) *rawSession {
	t.Helper()
	rs := &rawSession{mcpraw.Client{URL: f.mcpURL(), Version: "2025-06-18", HTTP: &http.Client{Timeout: wait}}}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if r, err := rs.Initialize(ctx, caps); err != nil || r.Status != http.StatusOK || rs.Session == "" {
		t.Fatalf("initialize: %v %v", err, r)
	}
	t.Cleanup(func() { rs.close() })
	return rs
}

// close ends the session (DELETE); it returns the HTTP status, 0 when the request failed.
func (rs *rawSession) close() int {
	resp, err := rs.Do(rs.NewRequest(context.Background(), http.MethodDelete, ""))
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// post sends one message and returns the JSON-RPC messages of the answer (a JSON body
// or an SSE stream), each as its raw members.
func (rs *rawSession) post(body string) ([]map[string]json.RawMessage, error) {
	r, err := rs.Post(context.Background(), body)
	switch {
	case err != nil:
		return nil, err
	case r.Status == http.StatusAccepted:
		return nil, nil
	case r.Status != http.StatusOK:
		return nil, fmt.Errorf("HTTP %d: %s", r.Status, r.Body)
	}
	var msgs []map[string]json.RawMessage
	for _, p := range r.Messages() {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(p, &m); err != nil {
			return nil, fmt.Errorf("bad message %q: %v", p, err)
		}
		msgs = append(msgs, m)
	}
	return msgs, nil
}
