package main

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkStatelessVsSession compares, in one run against one router and one backend,
// a 2026-07-28 client's tools/call (stateless: its _meta and headers in every request)
// with a 2025-11-25 session's (initialized once), in alternating rounds so that both see
// the same machine. It reports each path's time per call, the router's and the
// backend's CPU time per call (utime+stime from /proc, summed over each path's rounds),
// and their ratios (stateless / session: above 1 means the stateless path costs more),
// for a backend of each era. CPU per call is the figure to quote on a shared machine:
// its load inflates wall time, not the CPU a call takes.
//
//	go test -run '^$' -bench BenchmarkStatelessVsSession -benchtime 20000x -count 3 ./cmd/mcprouter/
func BenchmarkStatelessVsSession(b *testing.B) {
	for _, era := range []string{"modern", "legacy"} {
		b.Run(era, func(b *testing.B) {
			backend := startEraBackendProc(b, era)
			cfg := "stateless: on\nbackends:\n  - name: b\n    prefix: \"\"\n    url: http://" + backend.Addr() + "/mcp\n"
			p := startRouter(b, "--config", writeConfig(b, cfg))
			url := p.url("/mcp")
			cl := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
			defer cl.CloseIdleConnections()

			sid := benchInitialize(b, cl, url)
			stateless := func(id int) {
				benchPost(b, cl, url, `{"jsonrpc":"2.0","id":`+strconv.Itoa(id)+`,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"},`+statelessMeta+`}}`,
					map[string]string{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "echo"})
			}
			session := func(id int) {
				benchPost(b, cl, url, `{"jsonrpc":"2.0","id":`+strconv.Itoa(id)+`,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}`,
					map[string]string{"MCP-Protocol-Version": "2025-11-25", "Mcp-Session-Id": sid})
			}
			var tS, tL, rS, rL, kS, kL time.Duration // wall, router CPU, backend CPU
			round := func(fn func(int), n int, wall, router, backendCPU *time.Duration) {
				r0, k0, start := procCPU(b, p.Cmd.Process.Pid), procCPU(b, backend.Cmd.Process.Pid), time.Now()
				for i := 0; i < n; i++ {
					fn(i)
				}
				*wall += time.Since(start)
				*router += procCPU(b, p.Cmd.Process.Pid) - r0
				*backendCPU += procCPU(b, backend.Cmd.Process.Pid) - k0
			}
			var warm [6]time.Duration
			round(stateless, 200, &warm[0], &warm[1], &warm[2]) // warm both paths
			round(session, 200, &warm[3], &warm[4], &warm[5])
			const roundSize = 200
			calls := 0
			b.ResetTimer()
			for i := 0; calls < b.N; i++ {
				n := min(roundSize, b.N-calls)
				if i%2 == 0 {
					round(stateless, n, &tS, &rS, &kS)
					round(session, n, &tL, &rL, &kL)
				} else {
					round(session, n, &tL, &rL, &kL)
					round(stateless, n, &tS, &rS, &kS)
				}
				calls += n
			}
			b.StopTimer()
			per := func(d time.Duration, unit float64) float64 { return float64(d.Nanoseconds()) / unit / float64(calls) }
			b.ReportMetric(per(tS, 1), "stateless-ns/call")
			b.ReportMetric(per(tL, 1), "session-ns/call")
			b.ReportMetric(per(rS, 1e3), "stateless-router-cpu-us/call")
			b.ReportMetric(per(rL, 1e3), "session-router-cpu-us/call")
			b.ReportMetric(tS.Seconds()/tL.Seconds(), "stateless/session")
			b.ReportMetric(rS.Seconds()/rL.Seconds(), "stateless/session-router-cpu")
			b.ReportMetric(kS.Seconds()/kL.Seconds(), "stateless/session-backend-cpu")
		})
	}
}

// procCPU is the CPU time process pid has used (utime+stime, in clock ticks of 10ms:
// summed over many rounds, the ticks a round straddles even out).
func procCPU(tb testing.TB, pid int) time.Duration {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		tb.Fatal(err)
	}
	// The fields after the parenthesised command name: state is the first, utime the
	// 12th, stime the 13th.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 13 {
		tb.Fatalf("/proc/%d/stat: %s", pid, b)
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+s) * 10 * time.Millisecond
}

// benchInitialize opens a 2025-11-25 session and returns its id.
func benchInitialize(b *testing.B, cl *http.Client, url string) string {
	b.Helper()
	resp := benchPost(b, cl, url, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}`, nil)
	sid := resp.Header.Get("Mcp-Session-Id")
	if sid == "" {
		b.Fatal("no session")
	}
	benchPost(b, cl, url, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, map[string]string{"Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"})
	return sid
}

// benchPost sends one request and reads its answer, failing on anything but 2xx or an
// answer that is an error.
func benchPost(b *testing.B, cl *http.Client, url, body string, headers map[string]string) *http.Response {
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := cl.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode/100 != 2 || strings.Contains(string(out), `"error"`) {
		b.Fatalf("%d %s", resp.StatusCode, out)
	}
	return resp
}
