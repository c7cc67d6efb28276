package fanout

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/mcprouter/mcprouter/internal/ctxtime"
)

// The floor is the least any server can spend to deliver one event to N clients that
// each hold a TCP connection of their own, as MCP's GET streams do: one write(2) per
// connection, from one goroutine, of the event already framed as SSE; no HTTP, no
// per-connection goroutine, no session. Its clients read the same way the router's do.
// It puts the NATS comparison in proportion: NATS delivers to its subscribers over two
// connections, a few large writes for all of them, which no per-session stream can do.
//
// Protocol, on a loopback TCP port: a client sends "sub\n" and gets "ok\n" once it is
// registered, then SSE events; a publisher sends "pub\n", then one line per event to
// broadcast (its data, without newlines).

// floorServer is the floor's server side.
type floorServer struct {
	ln      net.Listener
	mu      sync.Mutex
	subs    []net.Conn
	conns   map[net.Conn]struct{} // every open connection, for close
	wg      sync.WaitGroup
	closing bool
}

func startFloor() (*floorServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	f := &floorServer{ln: ln, conns: map[net.Conn]struct{}{}}
	f.wg.Add(1)
	go f.accept()
	return f, nil
}

func (f *floorServer) addr() string { return f.ln.Addr().String() }

func (f *floorServer) accept() {
	defer f.wg.Done()
	for {
		c, err := f.ln.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			// Out of file descriptors, most likely: the connection waits in the
			// backlog; try again shortly rather than give up the listener.
			time.Sleep(10 * time.Millisecond)
			continue
		}
		f.mu.Lock()
		if f.closing {
			f.mu.Unlock()
			c.Close()
			return
		}
		f.conns[c] = struct{}{}
		f.wg.Add(1)
		f.mu.Unlock()
		go f.serve(c)
	}
}

// serve reads the client's role; a subscriber is then only written to (its goroutine
// waits for the connection to end), a publisher's lines are broadcast.
func (f *floorServer) serve(c net.Conn) {
	defer f.wg.Done()
	defer func() {
		f.mu.Lock()
		delete(f.conns, c)
		f.mu.Unlock()
		c.Close()
	}()
	br := bufio.NewReaderSize(c, 4096)
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	role, err := readLine(br, 16)
	if err != nil {
		return
	}
	c.SetReadDeadline(time.Time{})
	switch string(role) {
	case "sub":
		f.mu.Lock()
		f.subs = append(f.subs, c)
		f.mu.Unlock()
		if _, err := c.Write([]byte("ok\n")); err != nil {
			return
		}
		var one [1]byte
		c.Read(one[:]) // until the client closes
	case "pub":
		var frame []byte
		for {
			data, err := readLine(br, maxEventBytes)
			if err != nil {
				return
			}
			frame = append(append(append(frame[:0], "data: "...), data...), "\n\n"...)
			f.broadcast(frame)
		}
	}
}

// broadcast writes one event to every subscriber, in turn, from the calling goroutine.
func (f *floorServer) broadcast(frame []byte) {
	f.mu.Lock()
	subs := f.subs // append-only while open: the prefix is stable
	f.mu.Unlock()
	for _, c := range subs {
		c.Write(frame)
	}
}

func (f *floorServer) close() {
	f.mu.Lock()
	f.closing = true
	for c := range f.conns {
		c.Close()
	}
	f.mu.Unlock()
	f.ln.Close()
	ctxtime.WaitGroup(&f.wg, 10*time.Second)
}

// floorClient is one subscriber of the floor.
type floorClient struct {
	conn   net.Conn
	events eventReader
	rcv    receiver
}

func dialFloor(addr, role string, timeout time.Duration) (net.Conn, *bufio.Reader, error) {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return nil, nil, err
	}
	c.SetDeadline(time.Now().Add(timeout))
	if _, err := c.Write([]byte(role + "\n")); err != nil {
		c.Close()
		return nil, nil, err
	}
	br := bufio.NewReaderSize(c, 1024)
	if role == "sub" {
		ok, err := readLine(br, 16)
		if err != nil || string(ok) != "ok" {
			c.Close()
			return nil, nil, errors.Join(errors.New("fanout: floor subscription refused"), err)
		}
	}
	c.SetDeadline(time.Time{})
	return c, br, nil
}

func (h *harness) growFloor(n int) error {
	if h.floorPub == nil {
		c, _, err := dialFloor(h.floorAddr, "pub", h.opts.Timeout)
		if err != nil {
			return fmt.Errorf("fanout: floor publisher: %w", err)
		}
		h.floorPub = c
	}
	for i := len(h.floor); i < n; i++ {
		c, br, err := dialFloor(h.floorAddr, "sub", h.opts.Timeout)
		if err != nil {
			return fmt.Errorf("fanout: floor client %d: %w", i, err)
		}
		fc := &floorClient{conn: c, events: eventReader{br: br}}
		h.floorT.join(&fc.rcv, i)
		h.floor = append(h.floor, fc)
		h.readers.Add(1)
		go func() {
			defer h.readers.Done()
			for {
				if _, err := fc.events.Next(); err != nil {
					if !h.closing.Load() {
						h.streamErrs.Add(1)
					}
					return
				}
				h.floorT.deliver(&fc.rcv, h.floorT.now())
			}
		}()
	}
	return nil
}
