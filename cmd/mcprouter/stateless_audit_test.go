package main

// Tests of issue 12 that an audit found missing: a broken response stream loses only
// its own request, a stateless request is judged alone (nothing carried over from an
// earlier one on the same connection), a 2025 session before a 2026-only backend resumes
// its GET stream from the router's event log, the listen stream's final result carries
// serverInfo, and mcp-go on its default revision cancels a call on the backend.

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"strings"
	"testing"

	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/mcprouter/mcprouter/internal/mcpraw"
	"github.com/mcprouter/mcprouter/internal/testbin"
	"github.com/mcprouter/mcprouter/internal/testwait"
)

// modernRequest is a 2026-07-28 POST of body to p's MCP endpoint within ctx, with the
// revision and routing headers (Mcp-Name when name is set).
func modernRequest(ctx context.Context, p *routerProc, body, method, name string) *http.Request {
	return mcpraw.NewModernRequest(ctx, p.url("/mcp"), body, method, name)
}

// streamData yields the data of each event of an event-stream body (or the whole body of a
// JSON one) until it ends; the channel is closed then.
func streamData(resp *http.Response) <-chan string {
	out := make(chan string, 256)
	go func() {
		defer close(out)
		defer resp.Body.Close()
		if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			b, _ := io.ReadAll(resp.Body)
			out <- string(b)
			return
		}
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if line, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				out <- line
			}
		}
	}()
	return out
}

// backendStats reads the backend's counters (stats://server) with a 2026-07-28 request.
func backendStats(t *testing.T, p *routerProc) map[string]float64 {
	t.Helper()
	resp := postModern(t, p, `{"jsonrpc":"2.0","id":"stats","method":"resources/read","params":{"uri":"stats://server",`+statelessMeta+`}}`, "resources/read", "stats://server")
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var msg struct {
		Result struct {
			Contents []struct{ Text string }
		}
	}
	if err := json.Unmarshal(body, &msg); err != nil || len(msg.Result.Contents) != 1 {
		t.Fatalf("stats://server: %v: %s", err, body)
	}
	var m map[string]float64
	if err := json.Unmarshal([]byte(msg.Result.Contents[0].Text), &m); err != nil {
		t.Fatalf("stats://server: %v: %s", err, msg.Result.Contents[0].Text)
	}
	return m
}

// TestStatelessBrokenStreamLosesOnlyItsRequest: a 2026-07-28 client with two calls in
// flight on one HTTP client closes the first one's connection: the backend cancels that
// call alone, and the other (a progress call) goes on to its result with every progress
// notification. The broken call is a sleep, which sends nothing before its answer (the
// router turns its slow reply into a stream), or a progress call, which streams; a
// 2026-07-28 backend is given only the latter (it learns of a closed stream only when
// it writes to it: TestStatelessCancelSlowCall).
func TestStatelessBrokenStreamLosesOnlyItsRequest(t *testing.T) {
	testbin.Long(t, "starts processes")
	const meta = `"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}`
	for _, tc := range []struct{ era, tool, args string }{
		{"legacy", "sleep", `{"ms":20000}`},
		{"legacy", "progress", `{"steps":10000,"intervalMs":20}`},
		{"modern", "progress", `{"steps":10000,"intervalMs":20}`},
	} {
		t.Run(tc.era+"/"+tc.tool, func(t *testing.T) {
			p := startRouterFor(t, startEraBackend(t, tc.era))
			client := &http.Client{Transport: &http.Transport{}}
			defer client.CloseIdleConnections()
			before := backendStats(t, p)["cancelled"]

			brokenCtx, breakIt := context.WithCancel(context.Background())
			defer breakIt()
			brokenDone := make(chan error, 1)
			go func() {
				resp, err := client.Do(modernRequest(brokenCtx, p, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"`+tc.tool+`","arguments":`+tc.args+`,"_meta":{"progressToken":"p1",`+meta+`}}}`, "tools/call", tc.tool))
				if err == nil {
					_, err = io.ReadAll(resp.Body)
					resp.Body.Close()
				}
				brokenDone <- err
			}()
			// The other call lasts a while (100 steps, 50 ms apart), so that it is still
			// running when the first one's stream is broken and the backend cancels it.
			const steps = 100
			ctx, cancel := context.WithTimeout(context.Background(), 2*testTimeout)
			defer cancel()
			resp, err := client.Do(modernRequest(ctx, p, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"progress","arguments":{"steps":100,"intervalMs":50},"_meta":{"progressToken":"p2",`+meta+`}}}`, "tools/call", "progress"))
			if err != nil {
				t.Fatal(err)
			}
			progress := streamData(resp)
			first := testwait.Recv(t, "the other call's first notification", testTimeout, progress)
			if !strings.Contains(first, `"notifications/progress"`) || !strings.Contains(first, `"progressToken":"p2"`) {
				t.Fatalf("the other call: %s", first)
			}
			testwait.For(t, "both calls running on the backend", testTimeout, func() bool { return backendStats(t, p)["inFlight"] >= 2 })

			breakIt()
			if err := testwait.Recv(t, "the broken call to return", testTimeout, brokenDone); err == nil {
				t.Fatal("the broken call read its answer")
			}
			testwait.For(t, "the backend to cancel the broken call", testTimeout, func() bool { return backendStats(t, p)["cancelled"] > before })

			// The other call goes on: the rest of its progress, then its result.
			notes, result := 1, ""
			for msg := range progress {
				switch {
				case strings.Contains(msg, `"notifications/progress"`) && strings.Contains(msg, `"progressToken":"p2"`):
					notes++
				case strings.Contains(msg, `"id":2`):
					result = msg
				default:
					t.Errorf("unexpected message on the other call's stream: %s", msg)
				}
			}
			if notes != steps || !strings.Contains(result, `"result"`) || strings.Contains(result, `"error"`) || strings.Contains(result, `"isError":true`) {
				t.Fatalf("the other call: %d progress notifications (want %d), answer %s", notes, steps, result)
			}
			st := backendStats(t, p)
			if st["cancelled"] != before+1 || st["inFlight"] != 0 {
				t.Fatalf("the backend cancelled %v calls (want 1) and has %v in flight: %v", st["cancelled"]-before, st["inFlight"], st)
			}
		})
	}
}

// TestStatelessNoStateCarriedOver: 2026-07-28 requests of one client, the first on a
// connection declaring sampling and a log level, the next ones on the same connection
// not: each is judged by its own _meta. A call that samples is refused (-32021 with
// requiredCapabilities, before a 2026-07-28 backend) or at least not turned into
// input_required (before a 2025 one), and a call that logs sends no
// notifications/message. (An answer that becomes an event stream ends its connection:
// the router hijacks it, transport/streamable.go hijackStream. So the declared call
// that logs comes first, and the connection that is reused is that of the declared
// sample, answered in JSON.)
func TestStatelessNoStateCarriedOver(t *testing.T) {
	testbin.Long(t, "starts processes")
	const declared = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"sampling":{}},"io.modelcontextprotocol/logLevel":"debug"}`
	for _, era := range []string{"modern", "legacy"} {
		t.Run(era, func(t *testing.T) {
			p := startRouterFor(t, startEraBackend(t, era))
			client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1}}
			defer client.CloseIdleConnections()
			// send returns the messages of the answer and the connection it came on.
			send := func(body, name string) ([]string, net.Conn) {
				t.Helper()
				var conn net.Conn
				trace := &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { conn = i.Conn }}
				ctx, cancel := context.WithTimeout(httptrace.WithClientTrace(context.Background(), trace), testTimeout)
				defer cancel()
				resp, err := client.Do(modernRequest(ctx, p, body, "tools/call", name))
				if err != nil {
					t.Fatal(err)
				}
				var msgs []string
				for m := range streamData(resp) {
					msgs = append(msgs, m)
				}
				return msgs, conn
			}
			logs := func(msgs []string) int {
				n := 0
				for _, m := range msgs {
					if strings.Contains(m, `"notifications/message"`) {
						n++
					}
				}
				return n
			}

			// Declared: the log arrives, the sample asks the client (input_required).
			if msgs, _ := send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"log","arguments":{"level":"info","message":"asked for"},`+declared+`}}`, "log"); logs(msgs) != 1 {
				t.Fatalf("a call with a log level: %q, want its log message", msgs)
			}
			msgs, declaredConn := send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"sample","arguments":{"prompt":"hi"},`+declared+`}}`, "sample")
			if len(msgs) != 1 || !strings.Contains(msgs[0], `"resultType":"input_required"`) {
				t.Fatalf("a sample with sampling declared: %q, want input_required", msgs)
			}
			askedMsg := msgs[0]
			// Undeclared, on the same connection: judged alone.
			msgs, conn := send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"log","arguments":{"level":"error","message":"not asked for"},`+statelessMeta+`}}`, "log")
			if logs(msgs) != 0 {
				t.Fatalf("a call without a log level got a log message: %q", msgs)
			}
			if conn != declaredConn {
				t.Fatal("the call without a log level did not reuse the declared call's connection")
			}
			msgs, conn = send(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"sample","arguments":{"prompt":"hi"},`+statelessMeta+`}}`, "sample")
			if len(msgs) != 1 || strings.Contains(msgs[0], `"input_required"`) {
				t.Fatalf("a sample without sampling declared: %q, must not ask the client", msgs)
			}
			if era == "modern" && (!strings.Contains(msgs[0], `"code":-32021`) || !strings.Contains(msgs[0], `"requiredCapabilities"`)) {
				t.Fatalf("a sample without sampling declared: %s, want -32021 with requiredCapabilities", msgs[0])
			}
			if conn != declaredConn {
				t.Fatal("the sample without sampling did not reuse the declared call's connection")
			}
			t.Logf("without sampling declared: %s", msgs[0])

			// The declared sample is still waiting for its answer: given now, it completes
			// (and the router has no parked request left to wait for at shutdown).
			var asked mcpraw.Answer
			if err := json.Unmarshal([]byte(askedMsg), &asked); err != nil || len(asked.Result.InputRequests) != 1 {
				t.Fatalf("input_required: %v: %s", err, askedMsg)
			}
			for key := range asked.Result.InputRequests {
				status, a := toolCallAs(t, p, "", "sample", `{"prompt":"hi"}`, declared+retryParams(key, "ok", asked.Result.RequestState))
				wantText(t, "the declared sample's retry", status, a, "ok")
			}
		})
	}
}

// TestLegacyClientResumesBeforeModernBackend: a 2025 session in front of a 2026-only
// backend (its resource updates come from the router's upstream subscriptions/listen)
// loses its GET stream, misses two updates, and resumes with Last-Event-ID: the router's
// event log gives both, and nothing already seen again.
func TestLegacyClientResumesBeforeModernBackend(t *testing.T) {
	testbin.Long(t, "starts processes")
	p := startRouterFor(t, startEraBackend(t, "modern"))
	ctx, cancel := context.WithTimeout(context.Background(), 2*testTimeout)
	defer cancel()
	c := &mcpraw.Client{URL: p.url("/mcp")}
	if r, err := c.Initialize(ctx, ""); err != nil || r.Status != http.StatusOK || c.Session == "" {
		t.Fatalf("initialize: %v %v", err, r)
	}
	post := func(body string) {
		t.Helper()
		if r, err := c.Post(ctx, body); err != nil || r.Status != http.StatusOK || strings.Contains(string(r.Body), `"error"`) {
			t.Fatalf("POST %s: %v %v", body, err, r)
		}
	}
	open := func(lastID string) (<-chan mcpraw.Event, context.CancelFunc) {
		t.Helper()
		sctx, stop := context.WithCancel(ctx)
		req := c.NewRequest(sctx, http.MethodGet, "")
		if lastID != "" {
			req.Header.Set("Last-Event-ID", lastID)
		}
		resp, err := c.Do(req)
		if err != nil || resp.StatusCode != http.StatusOK {
			stop()
			t.Fatalf("GET stream (Last-Event-ID %q): %v %v", lastID, err, resp)
		}
		out := make(chan mcpraw.Event, 64)
		go func() {
			defer resp.Body.Close()
			mcpraw.ReadEvents(resp.Body, out)
		}()
		return out, stop
	}
	const uri = "memo://board"
	touch := func(id int) {
		post(`{"jsonrpc":"2.0","id":` + strconv.Itoa(id) + `,"method":"tools/call","params":{"name":"touch","arguments":{"uri":"` + uri + `"}}}`)
	}
	events, stop := open("")
	post(`{"jsonrpc":"2.0","id":2,"method":"resources/subscribe","params":{"uri":"` + uri + `"}}`)
	touch(3)
	first := testwait.Recv(t, "the first update", testTimeout, events)
	if !strings.Contains(first.Data, `"notifications/resources/updated"`) || first.ID == "" {
		t.Fatalf("first update (with an event id): %+v", first)
	}

	// The stream breaks; two updates happen while the client is away.
	stop()
	for range events { // the reader has seen the end
	}
	touch(4)
	touch(5)

	resumed, stopResumed := open(first.ID)
	defer stopResumed()
	for i := range 2 {
		ev := testwait.Recv(t, "a missed update", testTimeout, resumed)
		if !strings.Contains(ev.Data, `"notifications/resources/updated"`) || !strings.Contains(ev.Data, uri) || ev.ID == "" || ev.ID == first.ID {
			t.Fatalf("missed update %d after resuming from %s: %+v", i+1, first.ID, ev)
		}
	}
	// Nothing else was waiting: a new update is the next event.
	touch(6)
	if ev := testwait.Recv(t, "the update after resuming", testTimeout, resumed); !strings.Contains(ev.Data, `"notifications/resources/updated"`) {
		t.Fatalf("after resuming: %+v", ev)
	}
	select {
	case ev, ok := <-resumed:
		if ok {
			t.Fatalf("an extra event after resuming: %+v", ev)
		}
	default:
	}
}

// TestStatelessListenCompletionServerInfo: the graceful end of a subscriptions/listen
// stream is a result like any other: resultType and the router's serverInfo in _meta.
func TestStatelessListenCompletionServerInfo(t *testing.T) {
	testbin.Long(t, "starts processes")
	p := startRouterFor(t, startEraBackend(t, "legacy"))
	resp := postModern(t, p, `{"jsonrpc":"2.0","id":"L","method":"subscriptions/listen","params":{`+statelessMeta+`,"notifications":{"resourceSubscriptions":["memo://board"]}}}`, "subscriptions/listen", "")
	events := streamData(resp)
	if ack := testwait.Recv(t, "the acknowledgement", testTimeout, events); !strings.Contains(ack, `"notifications/subscriptions/acknowledged"`) {
		t.Fatalf("acknowledgement: %s", ack)
	}
	go p.Stop(testTimeout)
	end := testwait.Recv(t, "the graceful end", testTimeout, events)
	var msg struct {
		ID     string
		Result struct {
			ResultType string
			Meta       map[string]json.RawMessage `json:"_meta"`
		}
	}
	if err := json.Unmarshal([]byte(end), &msg); err != nil || msg.ID != "L" || msg.Result.ResultType != "complete" {
		t.Fatalf("end of the stream: %v: %s", err, end)
	}
	var info struct{ Name string }
	if err := json.Unmarshal(msg.Result.Meta["io.modelcontextprotocol/serverInfo"], &info); err != nil || info.Name != "mcprouter" {
		t.Fatalf("the final result's _meta lacks the router's serverInfo: %s", end)
	}
}

// TestMCPGoDefaultCancelReachesBackend: mcp-go on its default revision (2026-07-28)
// gives up a call (its context is cancelled): the backend stops the call, as the Go
// SDK's and TypeScript's checks see it, whatever the backend's era.
func TestMCPGoDefaultCancelReachesBackend(t *testing.T) {
	testbin.Long(t, "starts processes")
	for _, era := range backendEras {
		t.Run(era, func(t *testing.T) {
			p := startRouterFor(t, startEraBackend(t, era))
			c, n := connectMCPGo(t, p.url("/mcp"), "")
			ctx, cancel := context.WithTimeout(context.Background(), 2*testTimeout)
			defer cancel()
			before := backendStats(t, p)["cancelled"]
			callCtx, stop := context.WithCancel(ctx)
			defer stop()
			done := make(chan error, 1)
			go func() {
				req := mcpgo.CallToolRequest{}
				req.Params.Name, req.Params.Arguments = "progress", map[string]any{"steps": 10000, "intervalMs": 20}
				req.Params.Meta = &mcpgo.Meta{ProgressToken: "tok-cancel"}
				_, err := c.CallTool(callCtx, req)
				done <- err
			}()
			testwait.Recv(t, "the call's first progress notification", testTimeout, n.progress)
			stop()
			if err := testwait.Recv(t, "the cancelled call to return", testTimeout, done); err == nil {
				t.Fatal("the cancelled call succeeded")
			}
			testwait.For(t, "the backend to cancel the call", testTimeout, func() bool {
				st := backendStats(t, p)
				return st["cancelled"] > before && st["inFlight"] == 0
			})
		})
	}
}
