package main

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkStatelessVsSession compares, in one run against one router and one backend,
// a 2026-07-28 client's tools/call (stateless: its _meta and headers in every request)
// with a 2025-11-25 session's (initialized once), in alternating rounds so that both see
// the same machine. It reports each path's time per call and their ratio (stateless /
// session: above 1 means the stateless path is slower), for a backend of each era.
//
//	go test -run '^$' -bench BenchmarkStatelessVsSession -benchtime 4000x ./cmd/mcprouter/
func BenchmarkStatelessVsSession(b *testing.B) {
	for _, era := range []string{"modern", "legacy"} {
		b.Run(era, func(b *testing.B) {
			addr := startEraBackend(b, era)
			cfg := "backends:\n  - name: b\n    prefix: \"\"\n    url: http://" + addr + "/mcp\n"
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
			round := func(fn func(int), n int) time.Duration {
				start := time.Now()
				for i := 0; i < n; i++ {
					fn(i)
				}
				return time.Since(start)
			}
			round(stateless, 200) // warm both paths
			round(session, 200)
			const roundSize = 100
			var tS, tL time.Duration
			calls := 0
			b.ResetTimer()
			for i := 0; calls < b.N; i++ {
				n := min(roundSize, b.N-calls)
				if i%2 == 0 {
					tS += round(stateless, n)
					tL += round(session, n)
				} else {
					tL += round(session, n)
					tS += round(stateless, n)
				}
				calls += n
			}
			b.StopTimer()
			b.ReportMetric(float64(tS.Nanoseconds())/float64(calls), "stateless-ns/call")
			b.ReportMetric(float64(tL.Nanoseconds())/float64(calls), "session-ns/call")
			b.ReportMetric(tS.Seconds()/tL.Seconds(), "stateless/session")
		})
	}
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
