package main

// Issue 19's attacks on connections and logs, against the real router process on
// loopback: replies never read, headers never finished, many connections from one
// address, secrets in malformed requests, and the safe-default refusals at start-up.

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcprouter/mcprouter/internal/testbin"
	"github.com/mcprouter/mcprouter/internal/testwait"
)

// dialFrom opens a raw TCP connection from the loopback address ip to the router.
func dialFrom(t *testing.T, p *routerProc, ip string) *net.TCPConn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: testTimeout}
	c, err := d.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c.(*net.TCPConn)
}

// statusLine reads the first line of an HTTP response on c ("" when the connection
// closed first).
func statusLine(t *testing.T, c net.Conn) string {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(testTimeout))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil && line == "" {
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatal("no answer and no close within the test timeout")
		}
	}
	return strings.TrimSpace(line)
}

// serverSideState is the TCP state (hex, as in /proc/net/tcp) of the router's end of
// the connection whose client end is local, or "" when it is gone.
func serverSideState(t *testing.T, server, local net.Addr) string {
	t.Helper()
	data, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		t.Skip("no /proc/net/tcp:", err)
	}
	hexAddr := func(a net.Addr) string {
		ta := a.(*net.TCPAddr)
		ip := ta.IP.To4()
		return fmt.Sprintf("%02X%02X%02X%02X:%04X", ip[3], ip[2], ip[1], ip[0], ta.Port)
	}
	want := hexAddr(server) + " " + hexAddr(local)
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) > 3 && f[1]+" "+f[2] == want {
			return f[3]
		}
	}
	return ""
}

// TestWriteTimeoutCutsUnreadReply: a client that asks for a large JSON reply and never
// reads it is cut off after connections.write_timeout, instead of holding the reply's
// memory for as long as it likes.
func TestWriteTimeoutCutsUnreadReply(t *testing.T) {
	// More than the kernel buffers (net.ipv4.tcp_wmem allows 4 MiB by default), so that
	// the router's own write blocks; less than the 8 MiB a backend message may carry.
	const size = 7000000
	p := startRouter(t, "--backend", "b=cmd:"+backendBin(t)+" stdio",
		"--config", writeConfig(t, "connections:\n  write_timeout: 1s\n"))
	sid := rawSession(t, &http.Client{Timeout: testTimeout}, p)

	c := dialFrom(t, p, "127.0.0.1")
	c.SetReadBuffer(4096) // the kernel buffers little of the reply for us
	writeRead(c, p, sid, 2, "bytes://"+strconv.Itoa(size))
	// The router's end leaves ESTABLISHED (01) when it gives up on the write.
	start := time.Now()
	testwait.For(t, "the router to let go of the connection of a reply nobody reads", testTimeout, func() bool {
		return serverSideState(t, c.RemoteAddr(), c.LocalAddr()) != "01"
	})
	held := time.Since(start)
	t.Logf("the router let go of the connection after %s", held.Round(time.Millisecond))
	// Well before the default write timeout (30s), which would also end the wait above:
	// only the configured 1s can have cut it this soon.
	if held > 15*time.Second {
		t.Errorf("the connection was cut after %s: the configured write_timeout (1s) was not applied", held.Round(time.Millisecond))
	}
	// What was written before the cut is still on its way; the rest never comes (a
	// closed socket's queued bytes may stall on a zero window: read for a while only).
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	got, _ := io.Copy(io.Discard, c)
	if got >= size {
		t.Errorf("read %d bytes: the whole reply arrived, it should have been cut", got)
	}
}

// TestWriteTimeoutSparesStreams: SSE streams outlive connections.write_timeout, both
// the Streamable HTTP GET stream (which takes the connection over) and the legacy
// /sse stream (a streamed response body); keep-alives keep arriving long after it.
func TestWriteTimeoutSparesStreams(t *testing.T) {
	const writeTimeout = 300 * time.Millisecond
	p := startRouter(t, "--config", writeConfig(t, "connections:\n  write_timeout: 300ms\nstreams:\n  keepalive: 100ms\n"))
	legacy := func(t *testing.T) io.ReadCloser {
		resp, err := http.Get(p.url("/sse"))
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("GET /sse: %v %v", err, resp)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp.Body
	}
	for name, open := range map[string]func(*testing.T) io.ReadCloser{
		"streamable": func(t *testing.T) io.ReadCloser { return openRawStream(t, p) },
		"legacy":     legacy,
	} {
		t.Run(name, func(t *testing.T) {
			stream := open(t)
			start := time.Now()
			sc := bufio.NewScanner(stream)
			for sc.Scan() && time.Since(start) < 5*writeTimeout {
			}
			if time.Since(start) < 5*writeTimeout {
				t.Fatalf("the stream ended after %s (err %v): the write timeout cut it", time.Since(start), sc.Err())
			}
		})
	}
}

// TestHeaderDeadline: a connection that never finishes its headers is closed after
// connections.header_timeout, although the body's deadline is long.
func TestHeaderDeadline(t *testing.T) {
	p := startRouter(t, "--config", writeConfig(t, "connections:\n  header_timeout: 500ms\n  read_timeout: 10m\n"))
	c := dialFrom(t, p, "127.0.0.1")
	start := time.Now()
	fmt.Fprintf(c, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: appl", p.Addr())
	line := statusLine(t, c) // an error answer, or the close itself
	if line != "" && !strings.Contains(line, "408") {
		t.Errorf("slow headers answered %q, want 408 or a close", line)
	}
	// The default header timeout (10s) also closes it within statusLine's wait: only
	// an end well before it shows the configured one at work. The bound is ten times
	// the configured timeout, far above any scheduling delay.
	if d := time.Since(start); d >= 5*time.Second {
		t.Errorf("the connection ended after %s: header_timeout (500ms) was not applied", d.Round(time.Millisecond))
	}
}

// TestPerAddressConnectionCap: past connections.max_per_address, connections from
// 127.0.0.2 are refused with 429, while 127.0.0.1 is still served.
func TestPerAddressConnectionCap(t *testing.T) {
	const limit = 3
	p := startRouter(t, "--config", writeConfig(t, "connections:\n  max_per_address: "+strconv.Itoa(limit)+"\n"))
	probe := fmt.Sprintf("GET /nothing HTTP/1.1\r\nHost: %s\r\n\r\n", p.Addr())
	for i := 0; i < limit; i++ {
		c := dialFrom(t, p, "127.0.0.2")
		io.WriteString(c, probe)
		if line := statusLine(t, c); !strings.Contains(line, "404") {
			t.Fatalf("connection %d from 127.0.0.2: %q, want the router's 404", i, line)
		}
	}
	extra := dialFrom(t, p, "127.0.0.2")
	io.WriteString(extra, probe)
	if line := statusLine(t, extra); line != "" && !strings.Contains(line, "429") {
		t.Errorf("connection %d from 127.0.0.2: %q, want 429 or a close", limit+1, line)
	}
	other := dialFrom(t, p, "127.0.0.1")
	io.WriteString(other, probe)
	if line := statusLine(t, other); !strings.Contains(line, "404") {
		t.Errorf("127.0.0.1 while 127.0.0.2 is at its cap: %q, want the router's 404", line)
	}
}

// TestNoSecretsInLogs: malformed requests carrying an Authorization header leave no
// trace of the token in the router's log, at debug level.
func TestNoSecretsInLogs(t *testing.T) {
	const token = "SECRET-7f3a9c-token"
	p := startRouter(t, "--log-level", "debug")
	auth := "Authorization: Bearer " + token + "\r\n"
	for i, req := range []string{
		"POST /mcp HTTP/1.1\r\nHost: " + p.Addr() + "\r\n" + auth + "Broken header line\r\n\r\n",
		"P@ST /mcp HTTP/1.1\r\nHost: " + p.Addr() + "\r\n" + auth + "\r\n",
		"POST /mcp HTTP/1.1\r\nHost: " + p.Addr() + "\r\n" + auth + "X-Pad: " + strings.Repeat("a", 20<<10) + "\r\n\r\n",
		"POST /mcp HTTP/1.1\r\nHost: " + p.Addr() + "\r\n" + auth + "Content-Length: zz\r\n\r\n",
		"POST /mcp HTTP/1.1\r\nHost: " + p.Addr() + "\r\n" + auth + "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: 30\r\n\r\n{\"jsonrpc\":\"2.0\",\"id\":" + token[:7] + "}",
	} {
		c := dialFrom(t, p, "127.0.0.1")
		io.WriteString(c, req)
		if line := statusLine(t, c); !strings.Contains(line, " 4") && line != "" {
			t.Errorf("malformed request %d answered %q, want a 4xx", i, line)
		}
	}
	p.stop(t)
	if p.Log.Contains(token) || p.Log.Contains("Bearer") {
		t.Errorf("the token reached the log:\n%s", p.Log)
	}
}

// TestRefusesExposedListener: the router does not start on all interfaces without
// auth.mode, and says what to set; nor with an embedded NATS listener without
// credentials.
func TestRefusesExposedListener(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"mcp on all interfaces", []string{"--listen", "0.0.0.0:0"}, "set auth.mode"},
		{"nats without credentials", []string{"--listen", "127.0.0.1:0", "--config", writeConfig(t, "nats:\n  listen: 127.0.0.1:0\n")}, "set nats.user and nats.password"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := testbin.Spawn(testbin.Spec{Name: "mcprouter", Bin: routerBin(t), Args: tc.args,
				Ready: []string{"mcprouter listening"}, Wait: testTimeout})
			if p != nil {
				defer p.Kill()
			}
			if err == nil || !strings.Contains(err.Error(), "exited before it was ready") {
				t.Fatalf("mcprouter did not refuse to start: %v", err)
			}
			if p.Err() == nil {
				t.Fatalf("mcprouter exited 0\n%s", p.Log)
			}
			if !p.Log.Contains(tc.want) {
				t.Errorf("the refusal does not say what to set (%q):\n%s", tc.want, p.Log)
			}
			if p.Raced() {
				t.Errorf("the race detector reported a data race:\n%s", p.Log)
			}
		})
	}
}

// TestEmbeddedNATSRequiresCredentials: with nats.listen, the router's embedded NATS
// server refuses a client without the token and accepts one with it.
func TestEmbeddedNATSRequiresCredentials(t *testing.T) {
	p := startRouter(t, "--config", writeConfig(t, "nats:\n  listen: 127.0.0.1:0\n  token: e2e-token\n"))
	url := p.Log.Value("embedded NATS accepting clients", "url")
	if url == "" {
		t.Fatalf("no NATS client URL in the log:\n%s", p.Log)
	}
	if nc, err := nats.Connect(url, nats.MaxReconnects(0)); err == nil {
		nc.Close()
		t.Fatal("a client without credentials connected to the embedded NATS server")
	} else if !errors.Is(err, nats.ErrAuthorization) {
		t.Errorf("without credentials: %v, want an authorization error", err)
	}
	nc, err := nats.Connect(url, nats.Token("e2e-token"), nats.MaxReconnects(0))
	if err != nil {
		t.Fatalf("with the token: %v", err)
	}
	defer nc.Close()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
}

// TestAdminChecksHost: the admin listener answers its own names and those of
// admin.allowed_hosts, and refuses a foreign Host (a DNS rebinding page) with 421.
func TestAdminChecksHost(t *testing.T) {
	p := startRouter(t, "--config", writeConfig(t, "admin:\n  allowed_hosts: [prom.example]\n"))
	base := adminURL(t, p)
	for host, want := range map[string]int{"": http.StatusOK, "prom.example:8081": http.StatusOK, "evil.example": http.StatusMisdirectedRequest} {
		req, _ := http.NewRequest("GET", base+"/healthz", nil)
		if host != "" {
			req.Host = host
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("Host %q: %d, want %d", host, resp.StatusCode, want)
		}
	}
}

// TestMemoryLimitFromConfig: memory_limit becomes the runtime's soft limit, and the
// log says where it came from; GOMEMLIMIT in the environment wins.
func TestMemoryLimitFromConfig(t *testing.T) {
	cfg := writeConfig(t, "memory_limit: 512MiB\n")
	p := startRouter(t, "--config", cfg)
	if got, from := p.Log.Value("memory limit", "bytes"), p.Log.Value("memory limit", "from"); got != "536870912" || from != "memory_limit" {
		t.Errorf("memory limit %q from %q, want 536870912 from memory_limit\n%s", got, from, p.Log)
	}
	t.Setenv("GOMEMLIMIT", "300MiB")
	p = startRouter(t, "--config", cfg)
	if got, from := p.Log.Value("memory limit", "bytes"), p.Log.Value("memory limit", "from"); got != "314572800" || from != "GOMEMLIMIT" {
		t.Errorf("with GOMEMLIMIT: %q from %q, want 314572800 from GOMEMLIMIT", got, from)
	}
}

// TestChildEnvironmentAllowlist: a stdio backend's child process does not see a secret
// variable of the router's environment, and does see what it needs to run.
func TestChildEnvironmentAllowlist(t *testing.T) {
	const secret = "s3cr3t-e2e-value"
	t.Setenv("MCPR_E2E_SECRET", secret)
	script := `echo "envprobe secret=[$MCPR_E2E_SECRET] path=[${PATH:+set}] own=[$OWN]" >&2; exec "$0" stdio`
	cfg := fmt.Sprintf("backends:\n  - name: probe\n    command: [sh, -c, %q, %q]\n    env: [OWN=yes]\n", script, backendBin(t))
	p := startRouter(t, "--config", writeConfig(t, cfg))
	if !testwait.Poll(testTimeout, func() bool { return p.Log.Contains("envprobe") }) {
		t.Fatalf("the child's stderr line never reached the log:\n%s", p.Log)
	}
	if p.Log.Contains(secret) {
		t.Errorf("the child saw the router's secret:\n%s", p.Log)
	}
	if !p.Log.Contains("secret=[] path=[set] own=[yes]") {
		t.Errorf("the child's environment is not the allowlist plus its own:\n%s", p.Log)
	}
}
