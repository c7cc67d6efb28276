package main

// Issue 19's attacks on sessions and memory, against the real router process on
// loopback: a client filling the session table, oversized client capabilities, and many
// large replies in one session.

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/mcprouter/mcprouter/internal/mcpraw"
	"github.com/mcprouter/mcprouter/internal/testwait"
)

// clientFrom is an HTTP client whose connections come from the loopback address ip.
func clientFrom(ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: testTimeout}
	return &http.Client{Timeout: testTimeout, Transport: &http.Transport{
		DialContext:         d.DialContext,
		MaxIdleConnsPerHost: 4,
	}}
}

// rawPost sends one JSON-RPC message of session sid ("" for none) with cl, accepting
// accept, and returns the session id header, the status and the body.
func rawPost(t testing.TB, cl *http.Client, url, sid, accept, body string) (string, int, string) {
	t.Helper()
	c := &mcpraw.Client{URL: url, Version: "2025-06-18", Session: sid, HTTP: cl, Header: http.Header{"Accept": {accept}}}
	r, err := c.Post(context.Background(), body)
	if err != nil {
		t.Fatal(err)
	}
	return r.Header.Get("Mcp-Session-Id"), r.Status, string(r.Body)
}

const bothAccept = "application/json, text/event-stream"

// rawSession opens a 2025-06-18 session on p's /mcp with cl (initialize, then
// notifications/initialized) and returns its id.
func rawSession(t testing.TB, cl *http.Client, p *routerProc) string {
	t.Helper()
	c := &mcpraw.Client{URL: p.url("/mcp"), Version: "2025-06-18", HTTP: cl}
	if r, err := c.Initialize(context.Background(), ""); err != nil || c.Session == "" {
		t.Fatalf("initialize: %v %v", err, r)
	}
	return c.Session
}

// writeRead writes on c, a connection of the test's own to p, request id of session
// sid reading uri, and leaves its reply to the caller (to read, or not).
func writeRead(c net.Conn, p *routerProc, sid string, id int, uri string) {
	msg := `{"jsonrpc":"2.0","id":` + strconv.Itoa(id) + `,"method":"resources/read","params":{"uri":"` + uri + `"}}`
	fmt.Fprintf(c, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"+
		"Mcp-Session-Id: %s\r\nMCP-Protocol-Version: 2025-06-18\r\nContent-Length: %d\r\n\r\n%s", p.Addr(), sid, len(msg), msg)
}

func initBody(caps string) string {
	return `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":` + caps + `,"clientInfo":{"name":"attack","version":"1"}}}`
}

// TestAttackTableFill: a client on 127.0.0.2 opening sessions as fast as it can (a
// bounded loop) cannot stop a client on 127.0.0.1 from opening one: it is held to its
// per-address quota (its own idle sessions are replaced) and to its initialize rate
// (429 with Retry-After).
func TestAttackTableFill(t *testing.T) {
	p := startRouter(t, "--config", writeConfig(t, "sessions:\n  max: 40\n  max_per_client: 10\n  init_rate: 50\n  init_burst: 60\n"))
	attacker := clientFrom("127.0.0.2")
	opened, limited := 0, 0
	for i := 0; i < 200; i++ {
		sid, status, body := rawPost(t, attacker, p.url("/mcp"), "", bothAccept, initBody("{}"))
		switch {
		case sid != "":
			opened++
		case status == http.StatusTooManyRequests && strings.Contains(body, "retry later"):
			limited++
		default:
			t.Fatalf("attacker's initialize %d: %d %s", i, status, body)
		}
	}
	if opened < 10 || limited == 0 {
		t.Errorf("attacker opened %d sessions and was rate-limited %d times; want at least its quota, then 429s", opened, limited)
	}
	sid, status, body := rawPost(t, clientFrom("127.0.0.1"), p.url("/mcp"), "", bothAccept, initBody("{}"))
	if sid == "" {
		t.Fatalf("the other client cannot open a session: %d %s\n%s", status, body, p.Log)
	}
}

// TestAttackBigCapabilities: 3.9 MB of capabilities are refused with -32602 naming the
// 64 KiB limit, and no session opens.
func TestAttackBigCapabilities(t *testing.T) {
	p := startRouter(t)
	caps := `{"x":"` + strings.Repeat("a", 3900000) + `"}`
	sid, status, body := rawPost(t, http.DefaultClient, p.url("/mcp"), "", bothAccept, initBody(caps))
	if sid != "" || status != 200 || !strings.Contains(body, `"code":-32602`) || !strings.Contains(body, "64 KiB") {
		t.Errorf("3.9 MB capabilities: session %q, %d %.300s", sid, status, body)
	}
}

// TestAttackLargeReplies: 20 replies of 4 MB in one session, each on a reply stream kept
// for resumption (the client accepts only event streams), stay within the session's
// share: the router's sessions_budget_used_bytes never exceeds it.
func TestAttackLargeReplies(t *testing.T) {
	const share = 12 << 20
	p := startRouter(t, "--backend", "b=cmd:"+backendBin(t)+" stdio",
		"--config", writeConfig(t, fmt.Sprintf("sessions:\n  share_bytes: %d\n", share)))
	metrics := adminURL(t, p) + "/metrics"
	sid := largeReplies(t, p, 20, 4000000)
	used := gaugeValue(t, metrics, "mcprouter_sessions_budget_used_bytes")
	if used <= 0 || used > share {
		t.Errorf("budget used %v after 20 replies of 4 MB, want within the share %d", used, share)
	}
	rawDelete(t, p, sid)
	testwait.For(t, "the budget given back after the session ended", testTimeout, func() bool {
		return gaugeValue(t, metrics, "mcprouter_sessions_budget_used_bytes") == 0
	})
}

// largeReplies opens a session and reads n replies of size bytes, each on a reply
// stream (Accept: text/event-stream only); it returns the session id.
func largeReplies(t testing.TB, p *routerProc, n, size int) string {
	t.Helper()
	cl := &http.Client{Timeout: testTimeout}
	sid := rawSession(t, cl, p)
	for i := 0; i < n; i++ {
		_, status, body := rawPost(t, cl, p.url("/mcp"), sid, "text/event-stream",
			`{"jsonrpc":"2.0","id":`+strconv.Itoa(i+2)+`,"method":"resources/read","params":{"uri":"bytes://`+strconv.Itoa(size)+`"}}`)
		if status != 200 || len(body) < size {
			t.Fatalf("reply %d: %d, %d bytes: %.300s", i, status, len(body), body)
		}
	}
	return sid
}

// rawDelete ends session sid with a DELETE; what it answers is not the test's concern.
func rawDelete(t testing.TB, p *routerProc, sid string) {
	c := &mcpraw.Client{URL: p.url("/mcp"), Version: "2025-06-18", Session: sid}
	if resp, err := c.Do(c.NewRequest(context.Background(), http.MethodDelete, "")); err == nil {
		resp.Body.Close()
	}
}

// adminURL is the base URL of the router's admin listener, from its log.
func adminURL(t testing.TB, p *routerProc) string {
	t.Helper()
	var addr string
	if !testwait.Poll(testTimeout, func() bool {
		addr = p.Log.Value("admin listening", "addr")
		return addr != ""
	}) {
		t.Fatalf("no admin address in the log\n%s", p.Log)
	}
	return "http://" + addr
}

// gaugeValue reads one unlabelled metric from a Prometheus text endpoint (-1 if absent).
func gaugeValue(t testing.TB, url, name string) float64 {
	t.Helper()
	c := http.Client{Timeout: testTimeout}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return -1
}

// BenchmarkAttackRSS measures the router's resident memory under two of issue 19's
// attacks: 20 replies of 4 MB in one session, and 20 sessions with 3.9 MB capabilities,
// each on a fresh router with the default configuration. With MCPROUTER_BASELINE_BIN
// naming another mcprouter binary (an older build), the same runs against it too, side
// by side. Run with -benchtime=1x: one attack per router.
func BenchmarkAttackRSS(b *testing.B) {
	for _, bin := range attackBinaries(b) {
		b.Run(bin.name+"/replies-20x4MB", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				p := startRouterBin(b, bin.path, "--backend", "b=cmd:"+backendBin(b)+" stdio")
				measureRSS(b, p, func() { largeReplies(b, p, 20, 4000000) })
				p.stop(b)
			}
		})
		b.Run(bin.name+"/capabilities-20x3.9MB", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				p := startRouterBin(b, bin.path)
				caps := initBody(`{"x":"` + strings.Repeat("a", 3900000) + `"}`)
				measureRSS(b, p, func() {
					for j := 0; j < 20; j++ {
						rawPost(b, http.DefaultClient, p.url("/mcp"), "", bothAccept, caps)
					}
				})
				p.stop(b)
			}
		})
	}
}

// baselineBin is the older mcprouter build the attack benchmarks also measure, side by
// side, when MCPROUTER_BASELINE_BIN names one.
func baselineBin() string { return os.Getenv("MCPROUTER_BASELINE_BIN") }

// measureRSS reports the router's resident memory before and after attack, in MiB.
func measureRSS(b *testing.B, p *routerProc, attack func()) {
	before := rssMiB(b, p)
	attack()
	after := rssMiB(b, p)
	b.ReportMetric(before, "rss-before-MiB")
	b.ReportMetric(after, "rss-after-MiB")
	b.ReportMetric(after-before, "rss-growth-MiB")
}

// rssMiB is the VmRSS of the process, in MiB.
func rssMiB(b *testing.B, p *routerProc) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.Cmd.Process.Pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 64)
			return kb / 1024
		}
	}
	b.Fatal("no VmRSS")
	return 0
}
