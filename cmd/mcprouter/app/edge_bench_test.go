package app

import (
	"bufio"
	"fmt"
	"net"
	"runtime"
	"testing"

	"github.com/valyala/fasthttp"
)

// BenchmarkReduceMemory measures what fasthttp's ReduceMemoryUsage (on unless
// connections.keep_idle_buffers) trades: memory held by
// idle keep-alive connections (B/idle-conn, heap and stacks, 1000 connections that
// each made one request) against the cost of a request on a keep-alive connection
// (ns/op). Run both sides in one run: go test -run '^$' -bench ReduceMemory ./cmd/mcprouter/app/
func BenchmarkReduceMemory(b *testing.B) {
	for _, keep := range []bool{true, false} {
		b.Run(fmt.Sprintf("keep_idle_buffers=%v", keep), func(b *testing.B) {
			cfg := testConfig()
			cfg.Connections.KeepIdleBuffers = keep
			m := startMemApp(b, cfg)
			req := []byte("GET /nothing HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
			br := bufio.NewReader(nil)
			resp := new(fasthttp.Response)
			ask := func(c net.Conn) {
				if _, err := c.Write(req); err != nil {
					b.Fatal(err)
				}
				br.Reset(c)
				if err := resp.Read(br); err != nil {
					b.Fatal(err)
				}
			}
			const conns = 1000
			open := make([]net.Conn, 0, conns)
			defer func() {
				for _, c := range open {
					c.Close()
				}
			}()
			before := inUse()
			for i := 0; i < conns; i++ {
				c, err := m.ln.Dial()
				if err != nil {
					b.Fatal(err)
				}
				open = append(open, c)
				ask(c)
			}
			idle := float64(inUse()-before) / conns

			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				ask(open[i%conns])
			}
			b.StopTimer()
			b.ReportMetric(idle, "B/idle-conn")
		})
	}
}

// inUse is the heap and stack memory in use after a collection.
func inUse() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapInuse + ms.StackInuse)
}
