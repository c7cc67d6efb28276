//go:build unix

package readahead

import (
	"net"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/internal/testio"
)

// packetPair returns a wrapped server side and the client side of a packet socket
// pair (testio.PacketPair): the client counts the server's writes exactly.
func packetPair(t *testing.T) (*conn, *net.UnixConn) {
	t.Helper()
	s, client := testio.PacketPair(t)
	server, ok := wrap(s).(*conn)
	if !ok {
		t.Skip("connection not wrapped on this platform")
	}
	// Closed through the wrapper, which sends what it holds first, before the pair's
	// own ends are closed (cleanups run last first).
	t.Cleanup(func() { server.Close() })
	return server, client
}

// packets reads n packets from c, each as a string, or fails within a generous bound.
func packets(t *testing.T, c *net.UnixConn, n int) []string {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var got []string
	b := make([]byte, 64<<10)
	for range n {
		k, err := c.Read(b)
		if err != nil {
			t.Fatalf("after %d packets: %v", len(got), err)
		}
		got = append(got, string(b[:k]))
	}
	return got
}

// reply holds one complete reply, as the listener's handler wrapper does after a
// handler: Pipelined before it (with bound), HoldReply after.
func reply(t *testing.T, c *conn, bound time.Duration, body string) {
	t.Helper()
	if err := c.Pipelined(bound); err != nil {
		t.Fatal(err)
	}
	c.HoldReply()
	if err := c.SetWriteDeadline(time.Now().Add(time.Minute)); err != nil { // as fasthttp does
		t.Fatal(err)
	}
	if _, err := c.Write([]byte(body)); err != nil {
		t.Fatal(err)
	}
}

// TestPipelinedRunOneWrite: the replies of a pipelined run leave in one write, from the
// read that waits for the next request, which then reads at once (the client may
// have sent more): a request sent before that read is read.
func TestPipelinedRunOneWrite(t *testing.T) {
	c, client := packetPair(t)
	reply(t, c, time.Minute, "one;")
	reply(t, c, time.Minute, "two;")
	reply(t, c, time.Minute, "three;")
	if _, err := client.Write([]byte("next")); err != nil { // before the server reads
		t.Fatal(err)
	}
	next := serverRead(c, 4)
	if got := packets(t, client, 1); got[0] != "one;two;three;" {
		t.Fatalf("client read %q, want the three replies in one write", got)
	}
	if r := <-next; r != "next" {
		t.Fatalf("server read %q", r)
	}
}

// TestPipelinedRunThenHijack: a batch stays held through what a hijack does
// (SetWriteDeadline, SetDeadline, SyscallConn) and leaves with the stream's first
// write, in one write(2); the stream's later writes go out as they come.
func TestPipelinedRunThenHijack(t *testing.T) {
	c, client := packetPair(t)
	reply(t, c, time.Minute, "202;")
	reply(t, c, time.Minute, "result;")
	if err := c.Pipelined(time.Minute); err != nil { // the GET's handler
		t.Fatal(err)
	}
	for _, op := range []func() error{
		func() error { return c.SetWriteDeadline(time.Time{}) },
		func() error { return c.SetDeadline(time.Time{}) },
		func() error { _, err := c.SyscallConn(); return err },
	} {
		if err := op(); err != nil {
			t.Fatal(err)
		}
	}
	if !c.raw.pending() {
		t.Fatal("the batch went out before the stream's first write")
	}
	if n, err := c.WriteNow([]byte("event;")); n != 0 || err != nil {
		t.Fatalf("WriteNow with a batch held: %d %v; want nothing written", n, err)
	}
	c.Write([]byte("head;prime;"))
	c.Write([]byte("event;"))
	if got := packets(t, client, 2); got[0] != "202;result;head;prime;" || got[1] != "event;" {
		t.Fatalf("client read %q", got)
	}
}

// TestPipelinedBound: a batch whose next reply does not come (a slow or blocked
// handler) goes out at its bound, on the timer, with no read or write of the
// connection's owner: the client has it while the handler still runs. The reply that
// handler makes then goes out as a held reply does.
func TestPipelinedBound(t *testing.T) {
	c, client := packetPair(t)
	reply(t, c, time.Minute, "first;")
	if err := c.Pipelined(time.Millisecond); err != nil { // a handler that blocks
		t.Fatal(err)
	}
	// No timing is asserted: only the timer can send it while nothing else runs.
	if got := packets(t, client, 1); got[0] != "first;" {
		t.Fatalf("client read %q", got)
	}
	c.HoldReply()
	c.Write([]byte("late;"))
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if got := packets(t, client, 1); got[0] != "late;" {
		t.Fatalf("client read %q", got)
	}
}

// TestPipelinedCloseSendsBatch: Close sends a batch held.
func TestPipelinedCloseSendsBatch(t *testing.T) {
	c, client := packetPair(t)
	reply(t, c, time.Minute, "a;")
	reply(t, c, time.Minute, "b;")
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if got := packets(t, client, 1); got[0] != "a;b;" {
		t.Fatalf("client read %q", got)
	}
}

// TestPipelinedBatchFull: a reply that does not fit after the batch sends the batch
// first, in order, and is held itself.
func TestPipelinedBatchFull(t *testing.T) {
	c, client := packetPair(t)
	big := string(make([]byte, maxHeld-2)) // does not fit after "small;"
	reply(t, c, time.Minute, "small;")
	reply(t, c, time.Minute, big)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if got := packets(t, client, 2); got[0] != "small;" || got[1] != big {
		t.Fatalf("client read %d packets of %d and %d bytes", len(got), len(got[0]), len(got[1]))
	}
}
