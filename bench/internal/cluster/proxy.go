package cluster

import (
	"io"
	"net"
	"sync"
)

// Proxy forwards TCP connections from its loopback port to a backend replica, and can
// drop every connection it carries at once: the fault "a backend's connections
// dropped", played without touching the kernel's tables.
type Proxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
}

// NewProxy listens on addr (host:port; port 0 picks one) and forwards to target.
func NewProxy(addr, target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	go p.accept()
	return p, nil
}

// Addr is the proxy's listening address.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.serve(c)
	}
}

func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) forget(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

func (p *Proxy) serve(c net.Conn) {
	if !p.track(c) {
		c.Close()
		return
	}
	defer p.forget(c)
	u, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	if !p.track(u) {
		u.Close()
		return
	}
	defer p.forget(u)
	done := make(chan struct{}, 2)
	go func() { io.Copy(u, c); done <- struct{}{} }()
	go func() { io.Copy(c, u); done <- struct{}{} }()
	<-done // either side ended: both are closed by the deferred forgets
}

// Drop closes every connection the proxy carries now (new ones are accepted); it
// returns how many it closed.
func (p *Proxy) Drop() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(p.conns)
	for c := range p.conns {
		if tc, ok := c.(*net.TCPConn); ok {
			tc.SetLinger(0) // a reset, as when a middlebox drops the connection
		}
		c.Close()
	}
	clear(p.conns)
	return n
}

// Close stops the proxy and drops its connections.
func (p *Proxy) Close() {
	p.ln.Close()
	p.Drop()
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
}
