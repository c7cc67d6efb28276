package readahead

import (
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// isDeadline reports a net.Conn timeout, as callers test for it.
func isDeadline(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) && errors.As(err, &ne) && ne.Timeout()
}

// A read deadline set while nothing waited ends the wait that follows, a later one
// replaces a deadline that has passed, and one set during a wait ends that wait.
func TestReadDeadlines(t *testing.T) {
	server, client := pair(t)
	var one [1]byte
	if err := server.SetReadDeadline(time.Now().Add(20 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if _, err := server.Read(one[:]); !isDeadline(err) {
		t.Fatalf("read past its deadline: %v", err)
	}
	// The deadline that passed is still the runtime's; a later one must win over it
	// even when the read finds bytes at once.
	if err := server.SetReadDeadline(time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if n, err := server.Read(one[:]); n != 1 || err != nil {
		t.Fatalf("read with a later deadline: %d, %v", n, err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := server.Read(one[:])
		done <- err
	}()
	time.Sleep(10 * time.Millisecond) // let the read park; the deadline below ends it either way
	if err := server.SetReadDeadline(time.Now()); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !isDeadline(err) {
			t.Fatalf("read whose deadline was set while it waited: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a deadline set during the wait did not end it")
	}
}

// TestDeadlineSetAsReadWaits: a deadline set at the moment a read starts to wait ends
// that read, however the two interleave: the setter takes no lock while nothing waits
// (Deadlines), so one of the two must see the other's write.
func TestDeadlineSetAsReadWaits(t *testing.T) {
	server, _ := pair(t)
	var one [1]byte
	for i := range 200 {
		if err := server.SetReadDeadline(time.Time{}); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			_, err := server.Read(one[:])
			done <- err
		}()
		if err := server.SetReadDeadline(time.Now().Add(-time.Second)); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			if !isDeadline(err) {
				t.Fatalf("round %d: read under a passed deadline: %v", i, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("round %d: a deadline set as the read began to wait did not end it", i)
		}
	}
}

// A write that finds room never hands its deadline over; one that must wait for a
// peer that does not read ends at its deadline, with what it wrote.
func TestWriteDeadline(t *testing.T) {
	server, _ := pair(t)
	if err := server.SetWriteDeadline(time.Now().Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	if n, err := server.Write([]byte("fits")); n != 4 || err != nil {
		t.Fatalf("write with room: %d, %v", n, err)
	}
	if err := server.SetWriteDeadline(time.Now().Add(50 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	big := make([]byte, 64<<20) // more than both sockets' buffers: the client reads nothing
	n, err := server.Write(big)
	if !isDeadline(err) || n <= 0 || n >= len(big) {
		t.Fatalf("write to a peer that does not read: %d, %v", n, err)
	}
}

// SyscallConn hands the deadlines set so far over, for writers that wait through it.
func TestSyscallConnAppliesDeadlines(t *testing.T) {
	server, _ := pair(t)
	c, ok := server.(*conn)
	if !ok {
		t.Skipf("connection not wrapped on this platform (%T)", server)
	}
	d := time.Now().Add(time.Hour)
	if err := c.SetDeadline(d); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SyscallConn(); err != nil {
		t.Fatal(err)
	}
	c.dl.mu.Lock()
	defer c.dl.mu.Unlock()
	if c.dl.set[Read] != deadlineOf(d) || c.dl.set[Write] != deadlineOf(d) {
		t.Fatalf("deadlines handed over: %v, %v; want %v", c.dl.set[Read].asTime(), c.dl.set[Write].asTime(), d)
	}
}

// Writers may write at once, as on any net.Conn: each write arrives whole.
func TestConcurrentWrites(t *testing.T) {
	server, client := pair(t)
	const writers, each = 4, 200
	msg := func(w int) []byte { return []byte{'a' + byte(w), 'a' + byte(w), 'a' + byte(w), '\n'} }
	done := make(chan error, writers)
	for w := range writers {
		go func() {
			var err error
			for i := 0; i < each && err == nil; i++ {
				_, err = server.Write(msg(w))
			}
			done <- err
		}()
	}
	got := make([]byte, writers*each*4)
	if _, err := io.ReadFull(client, got); err != nil {
		t.Fatal(err)
	}
	for range writers {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < len(got); i += 4 {
		if got[i] != got[i+1] || got[i] != got[i+2] || got[i+3] != '\n' {
			t.Fatalf("writes interleaved at %d: %q", i, got[i:i+4])
		}
	}
}

// deadlineLog is a net.Conn that records the read deadlines handed to it.
type deadlineLog struct {
	net.Conn
	set []time.Time
}

func (c *deadlineLog) SetReadDeadline(t time.Time) error {
	c.set = append(c.set, t)
	return nil
}

// A wait keeps the runtime's deadline when the one wanted is at most lazySlack later,
// and hands over a later one, an earlier one, or none; Stale then hands over the
// exact deadline, and Apply always does.
func TestWaitKeepsSlightlyEarlierDeadline(t *testing.T) {
	var c deadlineLog
	var d Deadlines
	d.Init(&c)
	base := time.Now().Add(time.Minute)
	wait := func(at time.Time) {
		t.Helper()
		if err := d.SetReadDeadline(at); err != nil {
			t.Fatal(err)
		}
		if err := d.BeforeWait(Read); err != nil {
			t.Fatal(err)
		}
		d.Woke(Read)
	}
	wait(base)
	wait(base.Add(lazySlack / 2)) // kept
	wait(base.Add(lazySlack))     // kept
	wait(base.Add(lazySlack + 1)) // handed over
	wait(base)                    // earlier: handed over
	if err := d.SetReadDeadline(base.Add(time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if err := d.BeforeWaitUntil(Read, base.Add(2*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	// The kept deadline ended the wait: Stale hands the wanted one over.
	if !d.Stale(Read, os.ErrDeadlineExceeded) {
		t.Fatal("Stale: a kept earlier deadline is not the one wanted")
	}
	d.Woke(Read)
	if d.Stale(Read, os.ErrDeadlineExceeded) {
		t.Fatal("Stale after the exact deadline was handed over")
	}
	wait(time.Time{}) // none: handed over
	if err := d.SetReadDeadline(base.Add(time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if err := d.Apply(Read); err != nil {
		t.Fatal(err)
	}
	want := []time.Time{base, base.Add(lazySlack + 1), base, base.Add(time.Millisecond), {}, base.Add(time.Millisecond)}
	if len(c.set) != len(want) {
		t.Fatalf("deadlines handed over: %v, want %v", c.set, want)
	}
	for i := range want {
		if !c.set[i].Equal(want[i]) {
			t.Fatalf("deadline %d handed over: %v, want %v", i, c.set[i], want[i])
		}
	}
}

// A deadline keeps the instant of the time.Time it was set from (none for the zero
// time), orders as the times do, and keeps times beyond its range passed or far away.
func TestDeadlineOf(t *testing.T) {
	now := time.Now()
	epoch := time.Unix(0, 0)
	for _, tc := range []struct {
		name string
		at   time.Time
		want time.Time // what the runtime is handed
	}{
		{"zero", time.Time{}, time.Time{}},
		{"now", now, now},
		{"later, another zone", now.Add(time.Hour).In(time.FixedZone("x", 3600)), now.Add(time.Hour)},
		{"epoch", epoch, epoch.Add(-1)},
		{"year 1", time.Date(1, 1, 2, 0, 0, 0, 0, time.UTC), minDeadline},
		{"year 9999", time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC), maxDeadline},
	} {
		got := deadlineOf(tc.at).asTime()
		if !got.Equal(tc.want) || got.IsZero() != tc.want.IsZero() {
			t.Errorf("%s: %v handed over as %v, want %v", tc.name, tc.at, got, tc.want)
		}
	}
	if deadlineOf(epoch) == none || deadlineOf(time.Date(1, 1, 2, 0, 0, 0, 0, time.UTC)) == none {
		t.Error("a deadline that has passed is kept as none")
	}
	if !(deadlineOf(now) < deadlineOf(now.Add(1)) && deadlineOf(epoch) < deadlineOf(now)) {
		t.Error("deadlines do not order as their times")
	}
}

// A wait hands over a deadline at either end of the range kept (a distance between
// them that 64 bits do not hold is not taken for lazySlack).
func TestWaitHandsOverAcrossTheRange(t *testing.T) {
	var c deadlineLog
	var d Deadlines
	d.Init(&c)
	far := []time.Time{time.Date(1, 1, 2, 0, 0, 0, 0, time.UTC), time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)}
	for _, at := range far {
		if err := d.SetReadDeadline(at); err != nil {
			t.Fatal(err)
		}
		if err := d.BeforeWait(Read); err != nil {
			t.Fatal(err)
		}
		d.Woke(Read)
	}
	if len(c.set) != 2 || !c.set[0].Equal(minDeadline) || !c.set[1].Equal(maxDeadline) {
		t.Fatalf("deadlines handed over: %v, want %v and %v", c.set, minDeadline, maxDeadline)
	}
}

// BenchmarkSetDeadlineKept is what fasthttp's server costs a connection of Listen per
// deadline it sets (four per request) when no operation waits: the deadline is kept,
// not handed to the runtime. The clock read is the caller's, outside the loop.
func BenchmarkSetDeadlineKept(b *testing.B) {
	server, _ := pair(b)
	t := time.Now().Add(time.Minute)
	b.ReportAllocs()
	for b.Loop() {
		if err := server.SetReadDeadline(t); err != nil {
			b.Fatal(err)
		}
		if err := server.SetWriteDeadline(t); err != nil {
			b.Fatal(err)
		}
	}
}
