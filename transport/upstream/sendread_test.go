package upstream

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"
)

// dialTracked dials a loopback listener through connSet's dialer (the one the
// backend pools use) and returns both ends.
func dialTracked(t *testing.T) (*trackedConn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var set connSet
	c, err := set.dialer(5*time.Second)(ln.Addr().String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	peer, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); peer.Close() })
	return c.(*trackedConn), peer
}

// A request written in one piece goes out with the read of its reply, and every reply
// byte comes back; one too large to hold goes out at once.
func TestSendReadRequestReply(t *testing.T) {
	c, peer := dialTracked(t)
	for i, size := range []int{64, maxHeld, maxHeld + 1, 64} {
		req := bytes.Repeat([]byte{'a' + byte(i)}, size)
		if n, err := c.Write(req); n != size || err != nil {
			t.Fatalf("write %d: %d, %v", size, n, err)
		}
		got := make(chan []byte, 1)
		go func() {
			b := make([]byte, size)
			_, err := io.ReadFull(peer, b)
			if err == nil {
				_, err = peer.Write([]byte("reply " + strings.Repeat("z", i)))
			}
			if err != nil {
				b = nil
			}
			got <- b
		}()
		buf := make([]byte, 4096)
		n, err := c.Read(buf)
		if err != nil || string(buf[:n]) != "reply "+strings.Repeat("z", i) {
			t.Fatalf("request %d: read %q, %v", i, buf[:n], err)
		}
		if b := <-got; !bytes.Equal(b, req) {
			t.Fatalf("request %d: the backend got %d bytes, want %d", i, len(b), size)
		}
	}
}

// A request written in two parts keeps its order: the first part goes out when the
// second is written.
func TestSendReadTwoParts(t *testing.T) {
	c, peer := dialTracked(t)
	if _, err := c.Write([]byte("first,")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("second")); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		b := make([]byte, len("first,second"))
		_, err := io.ReadFull(peer, b)
		if err == nil && string(b) != "first,second" {
			err = errors.New("got " + string(b))
		}
		if err == nil {
			_, err = peer.Write([]byte("ok"))
		}
		done <- err
	}()
	buf := make([]byte, 16)
	if n, err := c.Read(buf); err != nil || string(buf[:n]) != "ok" {
		t.Fatalf("read %q, %v", buf[:n], err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// The wait for a reply ends at the read deadline, and a backend that closes instead of
// answering ends it with the end of the stream.
func TestSendReadDeadlineAndClose(t *testing.T) {
	c, peer := dialTracked(t)
	if err := c.SetReadDeadline(time.Now().Add(50 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 16)
	if _, err := c.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read without a reply: %v, want a deadline error", err)
	}
	if err := c.SetReadDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(peer, make([]byte, 4)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("pong")); err != nil {
		t.Fatal(err)
	}
	go func() {
		_, _ = io.ReadFull(peer, make([]byte, 4))
		peer.Close()
	}()
	if _, err := c.Read(buf); err != io.EOF {
		t.Fatalf("read after the backend closed: %v, want io.EOF", err)
	}
}

// A reply's wait under the earlier deadline the runtime kept from the exchange before
// (readahead.Deadlines keeps one at most 20 ms earlier) ends at the deadline wanted, not
// at the kept one, and the request goes out once.
func TestSendReadKeptDeadline(t *testing.T) {
	c, peer := dialTracked(t)
	kept := time.Now().Add(100 * time.Millisecond)
	if err := c.SetReadDeadline(kept); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("one")); err != nil {
		t.Fatal(err)
	}
	go func() {
		if _, err := io.ReadFull(peer, make([]byte, 3)); err == nil {
			_, _ = peer.Write([]byte("1"))
		}
	}()
	buf := make([]byte, 16)
	if n, err := c.Read(buf); n != 1 || err != nil {
		t.Fatalf("first reply: %d, %v", n, err)
	}
	want := kept.Add(10 * time.Millisecond)
	if err := c.SetReadDeadline(want); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("two")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read without a reply: %v, want a deadline error", err)
	}
	if now := time.Now(); now.Before(want) {
		t.Fatalf("the wait ended %v before its deadline", want.Sub(now))
	}
	got := make([]byte, 3)
	if _, err := io.ReadFull(peer, got); err != nil || string(got) != "two" {
		t.Fatalf("the backend got %q, %v", got, err)
	}
	if err := peer.SetReadDeadline(time.Now().Add(20 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if n, err := peer.Read(got); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the backend got %q more (%v), want the request once", got[:n], err)
	}
}

// Over TLS the pooled connection carries the handshake and the records the same way:
// every write is followed by the read of what answers it.
func TestSendReadTLS(t *testing.T) {
	echoOverTLS(t, HTTPOptions{MaxConns: 2})
}
