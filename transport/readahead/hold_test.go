//go:build unix

package readahead

import (
	"bytes"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"
)

// holder returns the server side of a loopback pair as a ReplyHolder, skipping where
// connections are not wrapped.
func holder(t *testing.T) (*conn, net.Conn) {
	t.Helper()
	server, client := pair(t)
	c, ok := server.(*conn)
	if !ok {
		t.Skipf("connection not wrapped on this platform (%T)", server)
	}
	if HolderOf(server) == nil {
		t.Fatal("HolderOf: nil for a connection of Listen")
	}
	return c, client
}

// readN reads exactly n bytes from c, or fails within a generous bound.
func readN(t *testing.T, c net.Conn, n int) string {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	b := make([]byte, n)
	if _, err := io.ReadFull(c, b); err != nil {
		t.Fatalf("read %d bytes: %v", n, err)
	}
	return string(b)
}

// serverRead reads from the server side on another goroutine.
func serverRead(c net.Conn, n int) <-chan string {
	got := make(chan string, 1)
	go func() {
		b := make([]byte, n)
		k, err := io.ReadFull(c, b)
		if err != nil {
			got <- "error: " + err.Error()
			return
		}
		got <- string(b[:k])
	}()
	return got
}

func TestHeldReplyGoesOutFromTheNextRead(t *testing.T) {
	c, client := holder(t)
	for i := range 20 { // request, reply, request, ... as a keep-alive client does
		req := "request " + strings.Repeat("r", i)
		if _, err := client.Write([]byte(req)); err != nil {
			t.Fatal(err)
		}
		got := serverRead(c, len(req))
		if r := <-got; r != req {
			t.Fatalf("server read %q, want %q", r, req)
		}
		c.HoldReply()
		reply := "reply " + strings.Repeat("x", i)
		if n, err := c.Write([]byte(reply)); n != len(reply) || err != nil {
			t.Fatalf("write: %d %v", n, err)
		}
		if !c.raw.pending() {
			t.Fatal("a complete reply was not held")
		}
		// The next read sends it; the client answers only once it has it.
		next := serverRead(c, 1)
		if r := readN(t, client, len(reply)); r != reply {
			t.Fatalf("client read %q, want %q", r, reply)
		}
		if _, err := client.Write([]byte{'!'}); err != nil {
			t.Fatal(err)
		}
		if r := <-next; r != "!" {
			t.Fatalf("server read %q after the reply, want %q", r, "!")
		}
	}
}

// TestHeldReplyPipelinedBytes: bytes the client sent before it had the reply (they are
// in the socket before the read that sends it starts) are still read, within the
// bound of the wait that skipped its read.
func TestHeldReplyPipelinedBytes(t *testing.T) {
	c, client := holder(t)
	if _, err := client.Write([]byte("one")); err != nil {
		t.Fatal(err)
	}
	if r := <-serverRead(c, 3); r != "one" {
		t.Fatalf("server read %q", r)
	}
	if _, err := client.Write([]byte("two")); err != nil { // before the reply: pipelined
		t.Fatal(err)
	}
	c.HoldReply()
	if _, err := c.Write([]byte("reply-one")); err != nil {
		t.Fatal(err)
	}
	got := serverRead(c, 3)
	select {
	case r := <-got:
		if r != "two" {
			t.Fatalf("server read %q, want %q", r, "two")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the pipelined request was never read")
	}
	if r := readN(t, client, 9); r != "reply-one" {
		t.Fatalf("client read %q", r)
	}
}

func TestHeldReplyCloseSendsIt(t *testing.T) {
	c, client := holder(t)
	c.HoldReply()
	if _, err := c.Write([]byte("last reply")); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	client.SetReadDeadline(time.Now().Add(10 * time.Second))
	b, err := io.ReadAll(client)
	if err != nil || string(b) != "last reply" {
		t.Fatalf("client read %q, %v; want the reply, then the end", b, err)
	}
}

// TestHeldReplyOtherOperations: what hands the connection on (SetDeadline, as
// fasthttp's hijack does; SyscallConn; Pipelined off) or writes again sends the held
// reply first, in order; a write deadline set between the announcement and the
// reply's write (as fasthttp sets one after its handler) keeps the reply held.
func TestHeldReplyOtherOperations(t *testing.T) {
	for _, tc := range []struct {
		name string
		op   func(c *conn) error
		want string
	}{
		{"SetDeadline", func(c *conn) error { return c.SetDeadline(time.Time{}) }, "held"},
		{"SyscallConn", func(c *conn) error { _, err := c.SyscallConn(); return err }, "held"},
		{"Pipelined off", func(c *conn) error { return c.Pipelined(0) }, "held"},
		{"another write, then Close's flush", func(c *conn) error {
			if _, err := c.Write([]byte("+more")); err != nil {
				return err
			}
			return c.flushHeld(true)
		}, "held+more"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, client := holder(t)
			c.HoldReply()
			if err := c.SetWriteDeadline(time.Now().Add(time.Minute)); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Write([]byte("held")); err != nil {
				t.Fatal(err)
			}
			if !c.raw.pending() {
				t.Fatal("the reply was not held past a write deadline")
			}
			if err := tc.op(c); err != nil {
				t.Fatal(err)
			}
			if r := readN(t, client, len(tc.want)); r != tc.want {
				t.Fatalf("client read %q, want %q", r, tc.want)
			}
			if c.raw.pending() {
				t.Error("still held")
			}
			// The reply is over: a stream's writes after it go out at once.
			if _, err := c.Write([]byte("event")); err != nil {
				t.Fatal(err)
			}
			if r := readN(t, client, 5); r != "event" {
				t.Fatalf("client read %q, want the event", r)
			}
		})
	}
}

// TestPipelinedOffSkipsNoRead: with no batching (Pipelined(0)) a request read with
// the one before it sends the earlier reply at once, and shows a pipelining client:
// the connection's later replies are still held, but the read that sends one reads
// at once after it (the client may have sent more before it had the reply).
func TestPipelinedOffSkipsNoRead(t *testing.T) {
	c, client := holder(t)
	c.HoldReply()
	c.Write([]byte("a"))
	if err := c.Pipelined(0); err != nil {
		t.Fatal(err)
	}
	if c.raw.pending() {
		t.Fatal("Pipelined(0) kept the reply")
	}
	c.HoldReply()
	c.Write([]byte("b"))
	if _, _, skip := c.raw.(*fdIO).takeHeld(false, true); skip {
		t.Error("a pipelining client's read would be skipped")
	}
	if r := readN(t, client, 1); r != "a" {
		t.Fatalf("client read %q", r)
	}
}

// TestHeldReplyLarge: a reply written in pieces keeps its order; a piece larger than
// the held buffer goes out at once, and the last piece is held.
func TestHeldReplyLarge(t *testing.T) {
	c, client := holder(t)
	big := bytes.Repeat([]byte("x"), 3*maxHeld)
	want := "head" + string(big) + "tail"
	c.HoldReply()
	done := make(chan error, 1)
	go func() { // the big piece may need the client to read
		for _, p := range [][]byte{[]byte("head"), big, []byte("tail")} {
			if _, err := c.Write(p); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	got := make(chan string, 1)
	go func() {
		b := make([]byte, len(want))
		client.SetReadDeadline(time.Now().Add(10 * time.Second))
		n, _ := io.ReadFull(client, b)
		got <- string(b[:n])
	}()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !c.raw.pending() {
		t.Fatal("the last piece was not held")
	}
	if _, err := client.Write([]byte("?")); err != nil { // not read before the reply
		t.Fatal(err)
	}
	if r := <-serverRead(c, 1); r != "?" {
		t.Fatalf("server read %q", r)
	}
	if r := <-got; r != want {
		t.Fatalf("client read %d bytes, want %d in order", len(r), len(want))
	}
}

// TestHeldReplyAfterBoundPassed: the wait that skipped its read leaves its bound with
// the runtime; a handler slower than that bound then finds it passed, and the runtime
// refuses the next read before any attempt. The reply held must still go out with the
// read that follows under the deadline wanted.
func TestHeldReplyAfterBoundPassed(t *testing.T) {
	c, client := holder(t)
	c.HoldReply()
	if _, err := c.Write([]byte("r0")); err != nil {
		t.Fatal(err)
	}
	next := serverRead(c, 2) // sends r0, waits within the bound
	if r := readN(t, client, 2); r != "r0" {
		t.Fatalf("client read %q", r)
	}
	client.Write([]byte("q1"))
	if r := <-next; r != "q1" {
		t.Fatalf("server read %q", r)
	}
	time.Sleep(heldWaitBound + 20*time.Millisecond)                        // a slow handler: the bound passes
	if err := c.SetReadDeadline(time.Now().Add(time.Minute)); err != nil { // fasthttp's idle deadline
		t.Fatal(err)
	}
	c.HoldReply()
	if _, err := c.Write([]byte("r1")); err != nil {
		t.Fatal(err)
	}
	next = serverRead(c, 2)
	if r := readN(t, client, 2); r != "r1" {
		t.Fatalf("client read %q after the bound passed", r)
	}
	client.Write([]byte("q2"))
	if r := <-next; r != "q2" {
		t.Fatalf("server read %q", r)
	}
}

// countedConn wraps a connection as fasthttp's per-address count does: the connection
// embedded as the first field.
type countedConn struct{ net.Conn }

// TestSeeThroughWrapper checks that a connection of Listen is found inside a wrapper
// that embeds it first, for the held reply and the descriptor alike, and that nothing
// else is taken for one.
func TestSeeThroughWrapper(t *testing.T) {
	server, client := pair(t)
	if _, ok := server.(*conn); !ok {
		t.Skipf("connection not wrapped on this platform (%T)", server)
	}
	w := &countedConn{Conn: server}
	if HolderOf(w) == nil {
		t.Error("HolderOf: nil for a wrapped connection of Listen")
	}
	if sc, ok := SyscallConnOf(w); !ok || sc != syscall.Conn(server.(*conn)) {
		t.Errorf("SyscallConnOf(wrapper) = %v, %v; want the connection of Listen", sc, ok)
	}
	if NowWriterOf(w) == nil {
		t.Error("NowWriterOf: nil for a wrapped connection of Listen")
	}
	if HolderOf(w) != HolderOf(&countedConn{Conn: server}) || HolderOf(w) == nil {
		t.Error("HolderOf: a wrapper of a type seen before does not give its connection")
	}
	if HolderOf((*countedConn)(nil)) != nil || HolderOf(&countedConn{}) != nil {
		t.Error("HolderOf: a holder for a nil wrapper, or a wrapper of nothing")
	}
	other := &countedConn{Conn: client} // a plain TCP connection: its own descriptor
	if HolderOf(other) != nil {
		t.Error("HolderOf: a holder for a connection not from Listen")
	}
	if NowWriterOf(other) != nil || NowWriterOf(client) != nil {
		t.Error("NowWriterOf: a writer for a connection not from Listen")
	}
	if _, ok := SyscallConnOf(other); ok {
		t.Error("SyscallConnOf: a descriptor through a wrapper of a connection not from Listen")
	}
	if _, ok := SyscallConnOf(client); !ok {
		t.Error("SyscallConnOf: no descriptor for a TCP connection")
	}
}

// BenchmarkHolderOfWrapped is the edge's lookup of the held reply through fasthttp's
// per-address wrapper, once per request.
func BenchmarkHolderOfWrapped(b *testing.B) {
	server, _ := pair(b)
	w := &countedConn{Conn: server}
	b.ReportAllocs()
	for b.Loop() {
		if HolderOf(w) == nil {
			b.Fatal("no holder")
		}
	}
}

// TestWriteNow: WriteNow writes what the socket takes and returns at once when it is
// full, whatever the write deadline; it writes nothing while a reply is held, which the
// next Write sends first; everything arrives in order.
func TestWriteNow(t *testing.T) {
	c, client := holder(t)
	if err := c.SetWriteDeadline(time.Now().Add(-time.Second)); err != nil { // passed: not waited for
		t.Fatal(err)
	}
	c.HoldReply()
	if _, err := c.Write([]byte("reply;")); err != nil {
		t.Fatal(err)
	}
	if n, err := c.WriteNow([]byte("event;")); n != 0 || err != nil {
		t.Fatalf("WriteNow with a reply held: %d, %v; want nothing written", n, err)
	}
	if _, err := c.Write([]byte("event;")); err != nil {
		t.Fatal(err)
	}
	if err := c.SetDeadline(time.Time{}); err != nil { // as a hijack does: what is held goes out
		t.Fatal(err)
	}
	if got := readN(t, client, 12); got != "reply;event;" {
		t.Fatalf("client read %q", got)
	}
	// A peer that does not read: the socket fills, and WriteNow returns what it took,
	// without waiting for its deadline.
	if err := c.SetWriteDeadline(time.Now().Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	chunk := bytes.Repeat([]byte("x"), 64<<10)
	total, full := 0, false
	for i := 0; i < 4096 && !full; i++ {
		n, err := c.WriteNow(chunk)
		if err != nil {
			t.Fatalf("WriteNow to a full socket: %v", err)
		}
		total, full = total+n, n < len(chunk)
	}
	if !full {
		t.Fatal("the socket never filled")
	}
	got := make(chan int, 1)
	go func() {
		client.SetReadDeadline(time.Now().Add(10 * time.Second))
		n, _ := io.CopyN(io.Discard, client, int64(total))
		got <- int(n)
	}()
	if n := <-got; n != total {
		t.Fatalf("client read %d bytes of the %d WriteNow wrote", n, total)
	}
}
