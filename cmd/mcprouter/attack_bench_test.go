package main

import (
	"fmt"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"
)

// BenchmarkAttackConnections measures the router's resident memory under the connection
// and session-table attacks of issue 19, each on a fresh router with the default
// configuration (so that an older build given by MCPROUTER_BASELINE_BIN runs the same):
//
//   - table-fill-10000: 10,000 initializes from one address (127.0.0.2);
//   - slow-headers-3000: 3,000 connections from six addresses that send half a request
//     line and then nothing;
//   - unread-replies-10x7MB: ten connections that ask for a 7 MB reply and never read.
//
// rss-after-MiB is read while the attack still holds what it holds (connections open,
// replies unread); rss-growth-MiB is against the router before the attack. Run with
// -benchtime=1x.
func BenchmarkAttackConnections(b *testing.B) {
	for _, bin := range attackBinaries(b) {
		b.Run(bin.name+"/table-fill-10000", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				p := startRouterBin(b, bin.path)
				cl := clientFrom("127.0.0.2")
				measureRSS(b, p, func() {
					for j := 0; j < 10000; j++ {
						rawPost(b, cl, p.url("/mcp"), "", bothAccept, initBody("{}"))
					}
				})
				p.stop(b)
			}
		})
		b.Run(bin.name+"/slow-headers-3000", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				p := startRouterBin(b, bin.path)
				var conns []net.Conn
				measureRSS(b, p, func() {
					for j := 0; j < 3000; j++ {
						c := dialAttacker(b, p, "127.0.0."+strconv.Itoa(2+j%6))
						if c == nil {
							continue // refused: the per-address cap at work
						}
						fmt.Fprintf(c, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Le", p.Addr())
						conns = append(conns, c)
					}
					time.Sleep(time.Second) // let the router take them in
				})
				b.ReportMetric(float64(len(conns)), "conns-accepted")
				for _, c := range conns {
					c.Close()
				}
				p.stop(b)
			}
		})
		b.Run(bin.name+"/unread-replies-10x7MB", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				p := startRouterBin(b, bin.path, "--backend", "b=cmd:"+backendBin(b)+" stdio")
				sid := rawSession(b, http.DefaultClient, p)
				var conns []net.Conn
				measureRSS(b, p, func() {
					for j := 0; j < 10; j++ {
						c := dialAttacker(b, p, "127.0.0.1")
						c.(*net.TCPConn).SetReadBuffer(4096)
						writeRead(c, p, sid, j+2, "bytes://7000000")
						conns = append(conns, c)
					}
					time.Sleep(3 * time.Second) // the replies reach the router and stall on the unread sockets
				})
				for _, c := range conns {
					c.Close()
				}
				p.stop(b)
			}
		})
	}
}

type attackBinary struct{ name, path string }

// attackBinaries is this build, and the build MCPROUTER_BASELINE_BIN names if set (first,
// so the two run side by side).
func attackBinaries(b *testing.B) []attackBinary {
	var bins []attackBinary
	if old := baselineBin(); old != "" {
		bins = append(bins, attackBinary{"baseline", old})
	}
	return append(bins, attackBinary{"this", routerBin(b)})
}

// dialAttacker opens a raw connection from ip, or returns nil when the router refuses or
// resets it.
func dialAttacker(b *testing.B, p *routerProc, ip string) net.Conn {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: testTimeout}
	c, err := d.Dial("tcp", p.Addr())
	if err != nil {
		return nil
	}
	return c
}
