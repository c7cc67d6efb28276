package cluster

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"
)

// The proxy carries bytes both ways, and Drop cuts every connection it carries while
// new ones still get through.
func TestProxyDrop(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	p, err := NewProxy("127.0.0.1:0", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	echo := func(c net.Conn) error {
		c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Write([]byte("ping\n")); err != nil {
			return err
		}
		line, err := bufio.NewReader(c).ReadString('\n')
		if err == nil && line != "ping\n" {
			t.Errorf("echoed %q", line)
		}
		return err
	}
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := echo(c); err != nil {
		t.Fatal(err)
	}
	if n := p.Drop(); n != 2 { // the client's side and the server's side
		t.Errorf("dropped %d connections, want 2", n)
	}
	if err := echo(c); err == nil {
		t.Error("a dropped connection still carried bytes")
	}
	c2, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if err := echo(c2); err != nil {
		t.Errorf("a new connection after the drop: %v", err)
	}
}

func TestReadUsageOfItself(t *testing.T) {
	u, err := ReadUsage(os.Getpid(), "")
	if err != nil {
		t.Skip("no /proc here:", err)
	}
	if u.RSS <= 0 || u.FDs <= 0 || u.Threads <= 0 || u.Goroutines != -1 {
		t.Errorf("usage %+v", u)
	}
}

// ReadUsage takes the goroutines and the heap from one scrape of the metrics, and
// Metrics says so when a series is missing.
func TestReadUsageMetrics(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, "# HELP go_goroutines x\ngo_goroutines 42\ngo_memstats_heap_alloc_bytes 1.2582912e+07\n")
	}))
	defer srv.Close()
	u, err := ReadUsage(os.Getpid(), srv.URL)
	if err != nil {
		t.Skip("no /proc here:", err)
	}
	if u.Goroutines != 42 || u.Heap != 12<<20 {
		t.Errorf("goroutines %d heap %d, want 42 and %d", u.Goroutines, u.Heap, 12<<20)
	}
	if _, err := Metrics(srv.URL, "go_goroutines", "go_gc_gogc_percent"); err == nil {
		t.Error("a missing series: no error")
	}
}

func TestAddrOf(t *testing.T) {
	for line, want := range map[string]string{
		`time=x level=INFO msg="mcprouter listening" addr=127.0.0.1:8080 mcp=/mcp`: "127.0.0.1:8080",
		`nats node ready addr=127.0.0.1:4222`:                                      "127.0.0.1:4222",
		`no address here`:                                                          "",
	} {
		if got := addrOf(line); got != want {
			t.Errorf("addrOf(%q) = %q, want %q", line, got, want)
		}
	}
}

// TestLevel: the mean resident memory and the floor of the counts over [from, to).
func TestLevel(t *testing.T) {
	t0 := time.Now()
	samples := []Sample{
		{At: t0, Usage: map[string]Usage{"a": {RSS: 100, FDs: 12, Goroutines: 7}}},
		{At: t0.Add(time.Second), Usage: map[string]Usage{"a": {RSS: 300, FDs: 10, Goroutines: 9}}},
		{At: t0.Add(2 * time.Second), Usage: map[string]Usage{"a": {RSS: 1000, FDs: 1, Goroutines: 1}}},
	}
	m, n := Level(samples, "a", t0, t0.Add(2*time.Second))
	if n != 2 || m.RSS != 200 || m.FDs != 10 || m.Goroutines != 7 {
		t.Errorf("level %+v over %d", m, n)
	}
	if m, _ := Level(samples[:1], "a", t0, t0.Add(time.Second)); m.Goroutines != 7 {
		t.Errorf("one sample: %+v", m)
	}
}

// TestDelta: the growth of the cumulative figures between the first and the last
// sample inside [from, to].
func TestDelta(t *testing.T) {
	t0 := time.Now()
	at := func(d time.Duration, cpu, wait time.Duration) Sample {
		return Sample{At: t0.Add(d), Usage: map[string]Usage{"a": {CPU: cpu, RunqueueWait: wait}}}
	}
	samples := []Sample{at(0, 1*time.Second, 0), at(time.Second, 2*time.Second, time.Second), at(3*time.Second, 5*time.Second, 4*time.Second), at(9*time.Second, 50*time.Second, 0)}
	cpu, wait, span := Delta(samples, "a", t0.Add(time.Second), t0.Add(5*time.Second))
	if cpu != 3*time.Second || wait != 3*time.Second || span != 2*time.Second {
		t.Errorf("cpu %v wait %v span %v", cpu, wait, span)
	}
	if _, _, span := Delta(samples, "a", t0.Add(4*time.Second), t0.Add(5*time.Second)); span != 0 {
		t.Errorf("no two samples: span %v", span)
	}
}
