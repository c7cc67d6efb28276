package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/internal/testbin"
	"github.com/mcprouter/mcprouter/internal/testwait"
)

// callTime is how long the slow calls of TestStdioChildKilledMidCall run (sleep, and
// progress at 100ms a step): long enough to be in flight when the child is killed on a
// loaded machine, short enough that the calls sent again run to their end quickly.
const callTime = 8 * time.Second

// TestStdioChildKilledMidCall: a real router with a stdio backend (mcpbackend, two
// replicas, then one), a Go SDK client with slow calls in flight on every replica, and
// one child process SIGKILLed mid-call. Every call gets exactly one answer, none hangs:
// a sleep call (annotated readOnlyHint, safe to repeat) lost on the killed child is sent
// to the other replica and its result comes from there; a progress call whose child had
// already sent progress about it (the client may have acted on it) is not repeated and
// gets a JSON-RPC error that says the backend was lost; with one replica there is no
// other to send to, and every call on the killed child gets that error. The router
// restarts the child, later calls succeed, and the router's goroutines and descriptors
// return to their level before the calls.
func TestStdioChildKilledMidCall(t *testing.T) {
	testbin.Long(t, "starts a router with stdio backends and kills one mid-call")
	for _, replicas := range []int{2, 1} {
		t.Run(strconv.Itoa(replicas)+" replicas", func(t *testing.T) { killChildMidCall(t, replicas) })
	}
}

func killChildMidCall(t *testing.T, replicas int) {
	cfg := fmt.Sprintf("admin: {listen: \"127.0.0.1:0\", pprof: true}\nbackends:\n  - {name: cli, command: [%q, stdio, \"--tick=0s\", --log-level, warn], instances: %d, timeout: 1m}\n",
		backendBin(t), replicas)
	p := startRouter(t, "--config", writeConfig(t, cfg))
	base := adminURL(t, p)
	admin := base + "/metrics"
	pid := p.Cmd.Process.Pid
	cli := func(metric string) float64 { return gaugeValue(t, admin, metric+`{backend="cli"}`) }
	testwait.For(t, "the stdio children to take requests", testTimeout, func() bool {
		return len(childPIDs(pid)) == replicas && cli("mcprouter_backend_healthy_instances") == float64(replicas)
	})

	// A first session lists the tools (the catalog fills as the children answer) and
	// makes a call, so that what the router starts once is running; the level of its
	// goroutines and descriptors is read once that session is gone.
	var wire *answerCounter
	var hc *http.Client
	connect := func(opts *mcp.ClientOptions) *mcp.ClientSession {
		t.Helper()
		wire = &answerCounter{tr: http.DefaultTransport.(*http.Transport).Clone()} // ids are per session
		hc = &http.Client{Transport: wire}
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "stdiokill", Version: "1"}, opts).Connect(ctx,
			&mcp.StreamableClientTransport{Endpoint: p.url("/mcp"), HTTPClient: hc, MaxRetries: -1}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return cs
	}
	cs := connect(nil)
	testwait.For(t, "the router to list cli__sleep", testTimeout, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		res, err := cs.ListTools(ctx, nil)
		return err == nil && slices.ContainsFunc(res.Tools, func(tl *mcp.Tool) bool { return tl.Name == "cli__sleep" })
	})
	echo(t, cs, "warm")
	cs.Close()
	hc.CloseIdleConnections()
	before := settledUsage(t, pid, base)

	// One progress call per replica, each seen running (its first progress
	// notification), then two sleep calls per replica, each seen sent to the backend:
	// the router sends each request to the replica with fewer requests outstanding.
	progress := &firstProgress{seen: map[any]chan struct{}{}}
	cs = connect(&mcp.ClientOptions{ProgressNotificationHandler: progress.note})
	type answer struct {
		call string
		res  *mcp.CallToolResult
		err  error
	}
	answers := make(chan answer, 3*replicas)
	call := func(name string, params *mcp.CallToolParams) {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*testTimeout)
			defer cancel()
			res, err := cs.CallTool(ctx, params)
			answers <- answer{name, res, err}
		}()
	}
	sent := 0
	for i := range replicas {
		token := "p" + strconv.Itoa(i)
		params := &mcp.CallToolParams{Name: "cli__progress", Arguments: map[string]any{"steps": int(callTime / (100 * time.Millisecond)), "intervalMs": 100}}
		params.SetProgressToken(token)
		ready := progress.expect(token)
		call("progress "+token, params)
		testwait.Recv(t, "the first progress of "+token, testTimeout, ready)
		sent++
	}
	for i := range 2 * replicas {
		call("sleep "+strconv.Itoa(i), &mcp.CallToolParams{Name: "cli__sleep", Arguments: map[string]any{"ms": callTime.Milliseconds()}})
		sent++
		testwait.For(t, fmt.Sprintf("%d calls in flight at the backend", sent), testTimeout, func() bool {
			return cli("mcprouter_backend_in_flight_requests") == float64(sent)
		})
	}

	children := childPIDs(pid)
	if len(children) != replicas {
		t.Fatalf("router %d has children %v, want %d", pid, children, replicas)
	}
	failovers := gaugeValue(t, admin, "mcprouter_backend_failovers_total")
	killed := children[0]
	if err := syscall.Kill(killed, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}

	// Every call answers once, within its bound: results from the surviving replica
	// (or the one a lost sleep was sent again to), errors for the calls that were lost.
	var results, lost int
	for range sent {
		a := testwait.Recv(t, "an answer to every call in flight", 2*testTimeout, answers)
		var werr *jsonrpc.Error
		switch {
		case a.err == nil && !a.res.IsError:
			results++
		case errors.As(a.err, &werr) && werr.Code == codec.CodeBackendUnavailable && strings.Contains(werr.Message, "child exited"):
			lost++
			if strings.HasPrefix(a.call, "sleep") && replicas > 1 {
				t.Errorf("%s, safe to repeat with another replica up, got %v", a.call, a.err)
			}
		default:
			t.Errorf("%s: result %+v, error %v; want a result or a -32010 error naming the lost child", a.call, a.res, a.err)
		}
	}
	// On the killed child: one progress call and two sleeps (the other replica, if
	// any, answers its own three). The sleeps go to the other replica when there is one.
	wantLost, wantFailovers := 3, 0.0
	if replicas > 1 {
		wantLost, wantFailovers = 1, 2
	}
	if lost != wantLost || results != sent-wantLost {
		t.Errorf("%d results and %d lost-backend errors, want %d and %d", results, lost, sent-wantLost, wantLost)
	}
	if got := gaugeValue(t, admin, "mcprouter_backend_failovers_total") - failovers; got != wantFailovers {
		t.Errorf("%v requests sent again to another replica, want %v", got, wantFailovers)
	}
	if twice := wire.twice(); len(twice) > 0 {
		t.Errorf("responses answered more than once on the wire, by id: %v", twice)
	}

	// The router restarts the child and the next calls succeed, on every replica.
	testwait.For(t, "the killed child to be replaced", testTimeout, func() bool {
		now := childPIDs(pid)
		return len(now) == replicas && !slices.Contains(now, killed) && cli("mcprouter_backend_healthy_instances") == float64(replicas)
	})
	if !p.Log.Contains("backend process restarted") {
		t.Errorf("the router did not log the restart:\n%s", p.Log)
	}
	for i := range 2 * replicas {
		echo(t, cs, "after "+strconv.Itoa(i))
	}
	cs.Close()
	hc.CloseIdleConnections()
	// Idle server workers (fasthttp keeps them a while for the next request) wind
	// down on their own: the level is back when the figures are, within the bound.
	var after routerUsage
	testwait.Poll(testTimeout, func() bool {
		after = settledUsage(t, pid, base)
		return after.fds <= before.fds && after.goroutines <= before.goroutines
	})
	if after.fds > before.fds || after.goroutines > before.goroutines {
		t.Errorf("router %d leaked: %d descriptors and %d goroutines before the calls, %d and %d after; goroutines more after:\n%s",
			pid, before.fds, before.goroutines, after.fds, after.goroutines, moreStacks(before.stacks, after.stacks))
	}
	t.Logf("%d replicas: %d results, %d lost; router %d descriptors, %d goroutines before; %d, %d after",
		replicas, results, lost, before.fds, before.goroutines, after.fds, after.goroutines)
}

// echo calls cli__echo and checks its text.
func echo(t *testing.T, cs *mcp.ClientSession, text string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "cli__echo", Arguments: map[string]any{"text": text}})
	if err != nil {
		t.Fatalf("echo %q: %v", text, err)
	}
	if tc, ok := res.Content[0].(*mcp.TextContent); res.IsError || !ok || tc.Text != text {
		t.Fatalf("echo %q: %+v", text, res)
	}
}

// routerUsage is what the router holds: open descriptors (from /proc) and goroutines
// (the total of its goroutine profile, read with the stacks: the go_goroutines metric
// also counts the goroutines its own scrape runs the collectors on, which vary).
type routerUsage struct {
	fds        int
	goroutines int
	stacks     string // the goroutines by stack (pprof, debug=1), for a failure message
}

// settledUsage reads the router's usage once no client request is in flight and its
// figures stopped falling (goroutines of a closed session wind down after the close
// is answered): the reads until two in a row agree.
func settledUsage(t *testing.T, pid int, admin string) routerUsage {
	t.Helper()
	testwait.For(t, "no request in flight", testTimeout, func() bool {
		return gaugeValue(t, admin+"/metrics", "mcprouter_requests_in_flight") == 0
	})
	var last routerUsage
	testwait.For(t, "the router's goroutines and descriptors to settle", testTimeout, func() bool {
		fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		if err != nil {
			t.Fatal(err)
		}
		stacks := goroutineProfile(t, admin)
		u := routerUsage{fds: len(fds), goroutines: profileTotal(t, stacks), stacks: stacks}
		same := u.fds == last.fds && u.goroutines == last.goroutines
		last = u
		return same
	})
	return last
}

// goroutineProfile is the router's goroutine profile, by stack (pprof, debug=1).
func goroutineProfile(t testing.TB, admin string) string {
	t.Helper()
	resp, err := (&http.Client{Timeout: testTimeout}).Get(admin + "/debug/pprof/goroutine?debug=1")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("goroutine profile: status %d, %v", resp.StatusCode, err)
	}
	return string(b)
}

// profileTotal reads the count on a goroutine profile's first line ("goroutine
// profile: total N").
func profileTotal(t testing.TB, profile string) int {
	t.Helper()
	first, _, _ := strings.Cut(profile, "\n")
	n, err := strconv.Atoi(strings.TrimPrefix(first, "goroutine profile: total "))
	if err != nil {
		t.Fatalf("goroutine profile's first line %q: %v", first, err)
	}
	return n
}

// moreStacks lists the stacks of a goroutine profile (pprof, debug=1) that more
// goroutines are in after than before, with the counts.
func moreStacks(before, after string) string {
	count := func(profile string) map[string]int {
		out := map[string]int{}
		for _, block := range strings.Split(profile, "\n\n") {
			head, stack, _ := strings.Cut(block, "\n")
			n, _, ok := strings.Cut(head, " @ ")
			if v, err := strconv.Atoi(n); ok && err == nil {
				out[stack] += v
			}
		}
		return out
	}
	b, a := count(before), count(after)
	var out strings.Builder
	for stack, n := range a {
		if n > b[stack] {
			fmt.Fprintf(&out, "%d -> %d\n%s\n\n", b[stack], n, stack)
		}
	}
	return out.String()
}

// childPIDs are the processes whose parent is pid (from /proc/<pid>/task/*/children).
func childPIDs(pid int) []int {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	var out []int
	for _, task := range tasks {
		b, _ := os.ReadFile(task)
		for _, f := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(f); err == nil {
				out = append(out, n)
			}
		}
	}
	slices.Sort(out)
	return out
}

// firstProgress closes a channel per progress token at its first notification.
type firstProgress struct {
	mu   sync.Mutex
	seen map[any]chan struct{}
}

// expect returns the channel closed at token's first progress notification.
func (f *firstProgress) expect(token string) <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	ch := make(chan struct{})
	f.seen[token] = ch
	return ch
}

func (f *firstProgress) note(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if ch, ok := f.seen[req.Params.ProgressToken]; ok {
		close(ch)
		delete(f.seen, req.Params.ProgressToken)
	}
}

// answerCounter is an http.RoundTripper that counts the JSON-RPC responses the router
// sends, by id, as they cross the wire (JSON bodies and SSE events): a request
// answered twice shows here even though the SDK drops the second answer.
type answerCounter struct {
	tr *http.Transport
	mu sync.Mutex
	n  map[string]int
}

// CloseIdleConnections closes the kept-alive connections, for http.Client's.
func (a *answerCounter) CloseIdleConnections() { a.tr.CloseIdleConnections() }

func (a *answerCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := a.tr.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	pr, pw := io.Pipe()
	body := resp.Body
	sse := strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream")
	go func() {
		defer io.Copy(io.Discard, pr)
		if !sse {
			if b, err := io.ReadAll(pr); err == nil {
				a.count(b)
			}
			return
		}
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for sc.Scan() {
			if data, ok := bytes.CutPrefix(sc.Bytes(), []byte("data:")); ok {
				a.count(data)
			}
		}
	}()
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.TeeReader(body, pw), closeBoth{body, pw}}
	return resp, nil
}

// count notes the responses in one JSON-RPC message (or batch).
func (a *answerCounter) count(msg []byte) {
	var batch []struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	msg = bytes.TrimSpace(msg)
	if len(msg) > 0 && msg[0] == '{' {
		msg = append(append([]byte{'['}, msg...), ']')
	}
	if json.Unmarshal(msg, &batch) != nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.n == nil {
		a.n = map[string]int{}
	}
	for _, m := range batch {
		if m.Method == "" && len(m.ID) > 0 && string(m.ID) != "null" {
			a.n[string(m.ID)]++
		}
	}
}

// twice lists the ids answered more than once.
func (a *answerCounter) twice() map[string]int {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := map[string]int{}
	for id, n := range a.n {
		if n > 1 {
			out[id] = n
		}
	}
	return out
}

// closeBoth closes the response body and the counter's pipe.
type closeBoth struct {
	body io.Closer
	pw   *io.PipeWriter
}

func (c closeBoth) Close() error {
	c.pw.Close()
	return c.body.Close()
}
