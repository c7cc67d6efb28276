//go:build unix

package upstream

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"
)

// tcpPair is a connected loopback pair: the dialed end, and the accepted one.
func tcpPair(t *testing.T) (dialed, accepted net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		got <- c
	}()
	dialed, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if accepted = <-got; accepted == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { dialed.Close(); accepted.Close() })
	return dialed, accepted
}

// TestRawIO: a pipelined connection's raw reads and writes move the bytes both ways,
// a write larger than the socket takes waits for room and goes out whole, a read
// waits for its bytes, ends at its deadline as a timeout, and ends with io.EOF when
// the peer closes; a write to a reset connection is an error isStaleConn recognizes.
func TestRawIO(t *testing.T) {
	d, peer := tcpPair(t)
	c := newRawIO(d)
	if _, ok := c.(*rawIO); !ok {
		t.Fatalf("newRawIO(%T) = %T, want a *rawIO", d, c)
	}
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB: more than the socket takes at once
	read := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(io.LimitReader(peer, int64(len(big))))
		read <- b
	}()
	if n, err := c.Write(big); n != len(big) || err != nil {
		t.Fatalf("Write: %d, %v", n, err)
	}
	if b := <-read; !bytes.Equal(b, big) {
		t.Fatalf("the peer read %d bytes, not what was written", len(b))
	}

	go func() {
		time.Sleep(20 * time.Millisecond)
		peer.Write([]byte("reply"))
	}()
	buf := make([]byte, 16)
	if n, err := c.Read(buf); err != nil || string(buf[:n]) != "reply" {
		t.Fatalf("Read: %q, %v", buf[:n], err)
	}

	if err := c.SetReadDeadline(time.Now().Add(20 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	_, err := c.Read(buf)
	var ne net.Error
	if !errors.Is(err, os.ErrDeadlineExceeded) || !errors.As(err, &ne) || !ne.Timeout() || !isTimeout(err) {
		t.Fatalf("Read past its deadline: %v", err)
	}
	if err := c.SetReadDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}

	peer.(*net.TCPConn).SetLinger(0) // the close resets the connection
	peer.Close()
	if n, err := c.Read(buf); n != 0 || (err != io.EOF && !errors.Is(err, syscall.ECONNRESET)) {
		t.Fatalf("Read after the peer closed: %d, %v", n, err)
	}
	var werr error
	for i := 0; i < 100 && werr == nil; i++ { // the first writes may still be taken
		_, werr = c.Write([]byte("more"))
	}
	if !isStaleConn(werr) {
		t.Fatalf("Write to a reset connection: %v, want a reset or broken pipe", werr)
	}
}

// TestRawIOAllocs: a write and the read of its bytes allocate nothing (the attempt
// functions are bound once per connection).
func TestRawIOAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates on its own")
	}
	d, peer := tcpPair(t)
	c := newRawIO(d)
	echo := newRawIO(peer)
	msg, buf := []byte("ping"), make([]byte, 16)
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := c.Write(msg); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(echo, buf[:len(msg)]); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 0 {
		t.Fatalf("%.1f allocations per write and read, want 0", allocs)
	}
}

// TestRawIOClose: closing the connection ends a read waiting on it, with the
// connection's own error.
func TestRawIOClose(t *testing.T) {
	d, _ := tcpPair(t)
	c := newRawIO(d)
	done := make(chan error, 1)
	go func() {
		_, err := c.Read(make([]byte, 8))
		done <- err
	}()
	time.Sleep(20 * time.Millisecond)
	c.Close()
	select {
	case err := <-done:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("Read on a closed connection: %v, want net.ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not end the read")
	}
}

// TestPeerClosed: the probe sees a live connection as live, even with bytes waiting
// (which it leaves to be read), and a closed one as closed.
func TestPeerClosed(t *testing.T) {
	d, peer := tcpPair(t)
	if peerClosed(d) {
		t.Fatal("a live connection probed as closed")
	}
	peer.Write([]byte("x"))
	time.Sleep(20 * time.Millisecond)
	if peerClosed(d) {
		t.Fatal("a live connection with a byte waiting probed as closed")
	}
	b := make([]byte, 1)
	if n, err := d.Read(b); n != 1 || b[0] != 'x' || err != nil {
		t.Fatalf("the probe consumed the byte: %q, %v", b[:n], err)
	}
	peer.Close()
	deadline := time.Now().Add(5 * time.Second)
	for !peerClosed(d) {
		if time.Now().After(deadline) {
			t.Fatal("a closed connection still probed as live")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
