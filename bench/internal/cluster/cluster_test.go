package cluster

import (
	"bufio"
	"io"
	"net"
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

func TestMean(t *testing.T) {
	t0 := time.Now()
	samples := []Sample{
		{At: t0, Usage: map[string]Usage{"a": {RSS: 100, FDs: 10, Goroutines: -1}}},
		{At: t0.Add(time.Second), Usage: map[string]Usage{"a": {RSS: 300, FDs: 20, Goroutines: -1}}},
		{At: t0.Add(2 * time.Second), Usage: map[string]Usage{"a": {RSS: 1000, FDs: 99, Goroutines: -1}}},
	}
	m, n := Mean(samples, "a", t0, t0.Add(2*time.Second))
	if n != 2 || m.RSS != 200 || m.FDs != 15 || m.Goroutines != -1 {
		t.Errorf("mean %+v over %d", m, n)
	}
}
