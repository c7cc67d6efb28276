//go:build unix

package transport

import (
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/internal/testio"
	"github.com/mcprouter/mcprouter/transport/sse"
)

// TestStreamSinkWriteSendsKeptWithEvent: what a sink keeps (a hijacked stream's
// response head, or what TryWrite could not write) goes out in the same write(2) as
// the next event, counted exactly on a packet socket pair; a large event follows the
// kept bytes in a write of its own.
func TestStreamSinkWriteSendsKeptWithEvent(t *testing.T) {
	server, client := testio.PacketPair(t)
	client.SetDeadline(time.Now().Add(20 * time.Second)) // a hang fails the test, not the run
	var k streamSink
	k.init(server)
	chunk := func(s string) string { return strconv.FormatInt(int64(len(s)), 16) + "\r\n" + s + "\r\n" }

	head := framePool.Get().(*[]byte)
	*head = append((*head)[:0], "HTTP/1.1 200 OK\r\n\r\n"...)
	k.kept = head
	if err := k.Write([]byte("data: a\n\n")); err != nil {
		t.Fatal(err)
	}
	wantPackets(t, client, "HTTP/1.1 200 OK\r\n\r\n"+chunk("data: a\n\n"))

	// Without a NowWriter TryWrite keeps the event for the next Write.
	if sent, err := k.TryWrite([]byte("data: b\n\n"), sse.EventID{}); sent || err != nil {
		t.Fatalf("TryWrite on a plain connection: sent %v, %v; want it kept", sent, err)
	}
	if err := k.Write([]byte("data: c\n\n")); err != nil {
		t.Fatal(err)
	}
	wantPackets(t, client, chunk("data: b\n\n")+chunk("data: c\n\n"))

	if err := k.Write([]byte("data: d\n\n")); err != nil {
		t.Fatal(err)
	}
	wantPackets(t, client, chunk("data: d\n\n"))

	large := "data: " + strings.Repeat("x", maxPooledFrame) + "\n\n"
	if sent, err := k.TryWrite([]byte("data: e\n\n"), sse.EventID{}); sent || err != nil {
		t.Fatalf("TryWrite on a plain connection: sent %v, %v; want it kept", sent, err)
	}
	if err := k.Write([]byte(large)); err != nil {
		t.Fatal(err)
	}
	wantPackets(t, client, chunk("data: e\n\n"), chunk(large))
	if k.kept != nil {
		t.Error("the sink still keeps bytes after a Write")
	}
}

// wantPackets reads one packet per want and fails the test when one differs.
func wantPackets(t *testing.T, c *net.UnixConn, want ...string) {
	t.Helper()
	buf := make([]byte, 2*maxPooledFrame)
	for i, w := range want {
		n, err := c.Read(buf)
		if err != nil {
			t.Fatalf("packet %d of %d: %v", i+1, len(want), err)
		}
		if got := string(buf[:n]); got != w {
			t.Errorf("packet %d of %d: %.80q (%d bytes), want %.80q (%d bytes)", i+1, len(want), got, len(got), w, len(w))
		}
	}
}
