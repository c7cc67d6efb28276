package client

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync/atomic"
	"time"
)

// maxSourceAddrs bounds one range of --source-addrs: a typo such as 127.0.0.2-127.9.0.9
// must not expand into millions of addresses.
const maxSourceAddrs = 1024

// ParseSourceAddrs expands a list of local addresses: comma-separated single addresses
// and inclusive ranges FIRST-LAST of one family ("127.0.0.2-127.0.0.9,127.0.1.1").
// An empty string is an empty list.
func ParseSourceAddrs(s string) ([]string, error) {
	var out []string
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		first, last, isRange := strings.Cut(part, "-")
		a, err := netip.ParseAddr(strings.TrimSpace(first))
		if err != nil {
			return nil, fmt.Errorf("source address %q: %v", part, err)
		}
		if !isRange {
			out = append(out, a.String())
			continue
		}
		b, err := netip.ParseAddr(strings.TrimSpace(last))
		if err != nil {
			return nil, fmt.Errorf("source address range %q: %v", part, err)
		}
		if a.Is4() != b.Is4() || b.Less(a) {
			return nil, fmt.Errorf("source address range %q: the last address must follow the first, in one family", part)
		}
		for n := 0; ; n++ {
			if n >= maxSourceAddrs {
				return nil, fmt.Errorf("source address range %q: more than %d addresses", part, maxSourceAddrs)
			}
			out = append(out, a.String())
			if a == b {
				break
			}
			a = a.Next()
		}
	}
	return out, nil
}

// sourceDialer opens TCP connections from the local addresses of Options.SourceAddrs in
// turn, so that one load generator can hold more connections to one destination than
// a single source address has ephemeral ports (about 28,000 with the usual
// ip_local_port_range). With no source addresses it dials as the system chooses.
type sourceDialer struct {
	addrs   []*net.TCPAddr
	next    atomic.Uint64
	timeout time.Duration
}

func newSourceDialer(addrs []string, timeout time.Duration) (*sourceDialer, error) {
	sd := &sourceDialer{timeout: timeout}
	for _, s := range addrs {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("client: source address %q: %v", s, err)
		}
		sd.addrs = append(sd.addrs, net.TCPAddrFromAddrPort(netip.AddrPortFrom(a, 0)))
	}
	return sd, nil
}

// dialer returns the net.Dialer of the next connection.
func (sd *sourceDialer) dialer() *net.Dialer {
	d := &net.Dialer{Timeout: sd.timeout}
	if n := uint64(len(sd.addrs)); n > 0 {
		d.LocalAddr = sd.addrs[(sd.next.Add(1)-1)%n]
	}
	return d
}

// DialContext is the dial function of net/http transports.
func (sd *sourceDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	return sd.dialer().DialContext(ctx, network, addr)
}

// Dial is the dial function of fasthttp host clients.
func (sd *sourceDialer) Dial(addr string) (net.Conn, error) {
	return sd.dialer().Dial("tcp", addr)
}
