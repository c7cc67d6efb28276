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
//
// What a connection costs the load generator counts, since it opens one per held
// session: its connections carry no TCP keep-alive (four setsockopt calls each, for
// probes a loopback benchmark never needs), and one bound to a source address takes
// its port at connect, not at bind (see bindAtConnect).
type sourceDialer struct {
	dialers []*net.Dialer // one per source address, or one without
	next    atomic.Uint64
}

func newSourceDialer(addrs []string, timeout time.Duration) (*sourceDialer, error) {
	sd := &sourceDialer{}
	for _, s := range addrs {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("client: source address %q: %v", s, err)
		}
		sd.dialers = append(sd.dialers, &net.Dialer{Timeout: timeout, KeepAlive: -1,
			LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(a, 0)), Control: bindAtConnect})
	}
	if len(sd.dialers) == 0 {
		sd.dialers = append(sd.dialers, &net.Dialer{Timeout: timeout, KeepAlive: -1})
	}
	return sd, nil
}

// dialer returns the net.Dialer of the next connection.
func (sd *sourceDialer) dialer() *net.Dialer {
	if n := uint64(len(sd.dialers)); n > 1 {
		return sd.dialers[(sd.next.Add(1)-1)%n]
	}
	return sd.dialers[0]
}

// DialContext is the dial function of net/http transports.
func (sd *sourceDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	return sd.dialer().DialContext(ctx, network, addr)
}

// Dial is the dial function of fasthttp host clients.
func (sd *sourceDialer) Dial(addr string) (net.Conn, error) {
	return sd.dialer().Dial("tcp", addr)
}
