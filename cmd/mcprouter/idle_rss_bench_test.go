package main

// Issue 15's memory per idle session: the real router process holding many sessions,
// each with its GET stream open on a loopback connection of its own and nothing to say.

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/internal/mcpraw"
)

// idleSessions is how many sessions BenchmarkIdleSessionRSS holds open.
const idleSessions = 5000

// idleConfig lifts the limits that would refuse idleSessions sessions from one test
// process (per-address quotas, the initialize rate) and turns on the admin pprof
// endpoint, whose heap profile with gc=1 collects garbage in the router before each
// reading of its RSS. Everything else is the default configuration.
const idleConfig = `sessions:
  max: 20000
  max_per_client: -1
  init_rate: -1
connections:
  max_per_address: -1
admin:
  pprof: true
`

// idleRecordWait is how long the reading waits after the last session opened: a
// router writes a session's record half a second after its last change (the settle of
// router/persist_writer.go), so that the records of the last sessions are in the NATS
// server when it is measured. The router says nothing when they are, and this is a
// benchmark's reading, not a test's condition.
const idleRecordWait = 2 * time.Second

// idleNATS are the two NATS set-ups of BenchmarkIdleSessionRSS: the default, an
// embedded server private to the router (which keeps no session records: nothing
// outside the process could read them), and an embedded server that other instances
// may join (nats.listen), where each session has its record in JetStream, in the
// router's own process.
var idleNATS = []struct{ name, config string }{
	{"private_nats", ""},
	{"nats_listen", "nats:\n  listen: 127.0.0.1:0\n  user: router\n  password: idle-bench-secret\n"},
}

// BenchmarkIdleSessionRSS measures the router's resident memory per idle session: VmRSS
// of a fresh router (default configuration, limits lifted) before and after idleSessions
// sessions open over loopback, each holding a GET stream on its own connection. Both
// readings follow a garbage collection in the router. It reports B/session (the growth
// divided by the sessions), and of that growth the Go heap and goroutine stacks in use
// (heap-B/session, stack-B/session; the rest is memory the runtime holds but does not
// use, and the runtime itself), and goroutines/session. With MCPROUTER_BASELINE_BIN naming
// another mcprouter binary (an older build), the same runs against it too, side by side.
// Each build runs under both NATS set-ups of idleNATS. Run with -benchtime=1x.
// MCPROUTER_IDLE_HEAP=path saves the router's heap profile while it holds the sessions,
// as path.<benchmark name> (go tool pprof -sample_index=inuse_space).
func BenchmarkIdleSessionRSS(b *testing.B) {
	raiseFileLimit(b, 2*idleSessions+1024)
	for _, bin := range attackBinaries(b) {
		for _, nc := range idleNATS {
			b.Run(bin.name+"/"+nc.name, func(b *testing.B) { idleSessionRSS(b, bin.path, idleConfig+nc.config) })
		}
	}
}

// idleSessionRSS is one run of BenchmarkIdleSessionRSS: the router binary at path, under
// config.
func idleSessionRSS(b *testing.B, path, config string) {
	for i := 0; i < b.N; i++ {
		p := startRouterBin(b, path, "--config", writeConfig(b, config))
		admin := adminURL(b, p)
		before := settledRSS(b, p, admin)
		conns := openIdleSessions(b, p, idleSessions)
		time.Sleep(idleRecordWait)
		after := settledRSS(b, p, admin)
		if heap := os.Getenv("MCPROUTER_IDLE_HEAP"); heap != "" {
			saveHeapProfile(b, admin, heap+"."+strings.ReplaceAll(b.Name(), "/", "."))
		}
		per := func(f func(routerMemory) int64) float64 { return float64(f(after)-f(before)) / idleSessions }
		b.ReportMetric(per(func(m routerMemory) int64 { return m.rss }), "B/session")
		b.ReportMetric(per(func(m routerMemory) int64 { return m.heapInuse }), "heap-B/session")
		b.ReportMetric(per(func(m routerMemory) int64 { return m.stackInuse }), "stack-B/session")
		b.ReportMetric(per(func(m routerMemory) int64 { return int64(m.goroutines) }), "goroutines/session")
		b.ReportMetric(float64(before.rss)/(1<<20), "rss-empty-MiB")
		b.ReportMetric(float64(after.rss)/(1<<20), "rss-held-MiB")
		for _, c := range conns {
			c.Close()
		}
		p.stop(b)
	}
}

// raiseFileLimit raises this process's descriptor limit (which the router inherits) to
// at least n, within the hard limit.
func raiseFileLimit(b *testing.B, n uint64) {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		b.Fatal(err)
	}
	if l.Cur >= n {
		return
	}
	if l.Max < n {
		b.Skipf("RLIMIT_NOFILE hard limit %d is below the %d descriptors the benchmark needs", l.Max, n)
	}
	l.Cur = n
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		b.Fatal(err)
	}
}

// saveHeapProfile writes the router's heap profile to path.
func saveHeapProfile(b *testing.B, admin, path string) {
	resp, err := (&http.Client{Timeout: testTimeout}).Get(admin + "/debug/pprof/heap")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if _, err := io.Copy(f, resp.Body); err != nil {
		b.Fatal(err)
	}
}

// routerMemory is what settledRSS reads of the router.
type routerMemory struct {
	rss, heapInuse, stackInuse int64
	goroutines                 int
}

// settledRSS collects the router's garbage (heap profile with gc=1, twice, so that
// finalizers' work is collected too), then reads the runtime's heap and stack in use,
// its number of goroutines, and its VmRSS once that has settled.
func settledRSS(b *testing.B, p *routerProc, admin string) routerMemory {
	cl := &http.Client{Timeout: testTimeout}
	var m routerMemory
	for i := 0; i < 2; i++ {
		resp, err := cl.Get(admin + "/debug/pprof/heap?gc=1&debug=1")
		if err != nil {
			b.Fatal(err)
		}
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "# HeapInuse = "); ok {
				m.heapInuse, _ = strconv.ParseInt(v, 10, 64)
			} else if v, ok := strings.CutPrefix(sc.Text(), "# Stack = "); ok {
				v, _, _ = strings.Cut(v, " ")
				m.stackInuse, _ = strconv.ParseInt(v, 10, 64)
			}
		}
		resp.Body.Close()
	}
	m.goroutines = profileTotal(b, goroutineProfile(b, admin))
	m.rss = settle(func() int64 { return int64(rssMiB(b, p) * (1 << 20)) })
	return m
}

// settle returns rss once it has stopped falling: the runtime gives memory freed by the
// collection back to the system in the background, over a few seconds, and an idle
// router has all the time it needs for that. It reads every 250ms until a second passes
// without a fall of more than 64 KiB, for at most 20s.
func settle(rss func() int64) int64 {
	low, stable := rss(), 0
	for deadline := time.Now().Add(20 * time.Second); stable < 4 && time.Now().Before(deadline); {
		time.Sleep(250 * time.Millisecond)
		if v := rss(); v < low-64<<10 {
			low, stable = v, 0
		} else {
			low, stable = min(low, v), stable+1
		}
	}
	return low
}

// openIdleSessions opens n sessions (revision 2025-11-25), 32 at a time, and holds a GET
// stream on each: its response head and priming event read, the connection kept.
func openIdleSessions(b *testing.B, p *routerProc, n int) []net.Conn {
	const workers = 32
	cl := &http.Client{Timeout: testTimeout, Transport: &http.Transport{MaxIdleConnsPerHost: workers}}
	conns := make([]net.Conn, n)
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; i < n; i += workers {
				c, err := openIdleSession(cl, p)
				if err != nil {
					errs <- fmt.Errorf("session %d: %w", i, err)
					return
				}
				conns[i] = c
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
		b.Fatal(err)
	}
	return conns
}

const idleVersion = "2025-11-25"

// openIdleSession initializes one session and opens its GET stream on a connection of
// its own, returned once the stream's priming event has arrived.
func openIdleSession(cl *http.Client, p *routerProc) (net.Conn, error) {
	rc := &mcpraw.Client{URL: p.url("/mcp"), Version: idleVersion, HTTP: cl}
	if r, err := rc.Initialize(context.Background(), ""); err != nil || r.Status != http.StatusOK || rc.Session == "" {
		return nil, fmt.Errorf("initialize: %v %v", err, r)
	}
	sid := rc.Session
	c, err := net.DialTimeout("tcp", p.Addr(), testTimeout)
	if err != nil {
		return nil, err
	}
	c.SetDeadline(time.Now().Add(testTimeout))
	fmt.Fprintf(c, "GET /mcp HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream\r\nMcp-Session-Id: %s\r\nMCP-Protocol-Version: %s\r\n\r\n", p.Addr(), sid, idleVersion)
	// The head, then the first chunk: the priming event ("id: 0-0", empty data).
	var got []byte
	buf := make([]byte, 1024)
	for !bytes.Contains(got, []byte("\r\n\r\n")) || !bytes.Contains(got, []byte("data:")) {
		k, err := c.Read(buf)
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("GET stream: %w after %q", err, got)
		}
		got = append(got, buf[:k]...)
	}
	if !bytes.HasPrefix(got, []byte("HTTP/1.1 200")) {
		c.Close()
		return nil, fmt.Errorf("GET stream: %q", got)
	}
	c.SetDeadline(time.Time{})
	return c, nil
}
