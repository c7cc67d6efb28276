package scale

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"os"
	"time"
)

// A run right after another finds the previous run's connections in TIME_WAIT for a
// minute: some 100,000 of them on the loaders' loopback source addresses. Each new
// connection's bind(2) to such an address then searches a nearly used-up port range,
// and the loaders spent 580-850 µs of CPU per session opened instead of 140-220 (their
// CPU profile: syscall.Bind), starving the routers: back-to-back runs opened 1,900-2,500
// sessions a second where a run on a clear machine opened 4,900. So a run waits for
// them to clear first, and says so.

// timeWaitFloor and timeWaitShare: a run starts with at most max(floor, share ×
// sessions) sockets in TIME_WAIT; fewer leave the ports of 8 source addresses free
// enough, and a small run (the test's) never waits for other programs' sockets.
const (
	timeWaitFloor = 20000
	timeWaitShare = 0.1
)

// timeWaitWait bounds the wait: the kernel holds a TIME_WAIT for 60 s.
const timeWaitWait = 75 * time.Second

// waitTimeWait waits until the machine holds few sockets in TIME_WAIT for the sessions
// to be opened, within timeWaitWait; logf says what it waits for. Where the count cannot
// be read it does not wait.
func waitTimeWait(ctx context.Context, sessions int, logf func(string, ...any)) {
	limit := max(timeWaitFloor, int(timeWaitShare*float64(sessions)))
	n, ok := timeWaitCount()
	if !ok || n <= limit {
		return
	}
	logf("%d connections in TIME_WAIT from an earlier run: waiting up to %v for them to clear (new connections' bind would be slow)", n, timeWaitWait)
	t := time.NewTicker(time.Second)
	defer t.Stop()
	end := time.After(timeWaitWait)
	for {
		select {
		case <-ctx.Done():
			return
		case <-end:
			logf("still %d connections in TIME_WAIT: the opening rate will suffer", n)
			return
		case <-t.C:
		}
		if n, ok = timeWaitCount(); !ok || n <= limit {
			return
		}
	}
}

// timeWaitCount counts the TCP sockets in TIME_WAIT (state 06 in /proc/net/tcp and
// tcp6); false where those files cannot be read.
func timeWaitCount() (int, bool) {
	n, read := 0, false
	for _, name := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(name)
		if err != nil {
			continue
		}
		read = true
		n += countState(f, []byte("06"))
		f.Close()
	}
	return n, read
}

// countState counts the lines of a /proc/net/tcp table whose state column (the fourth)
// is state.
func countState(f io.Reader, state []byte) int {
	n := 0
	sc := bufio.NewScanner(f)
	sc.Scan() // the header
	for sc.Scan() {
		fields := bytes.Fields(sc.Bytes())
		if len(fields) > 3 && bytes.Equal(fields[3], state) {
			n++
		}
	}
	return n
}
