package client

import (
	"errors"
	"io"
	"net"
	"net/url"
	"syscall"

	"github.com/valyala/fasthttp"
)

// instance is one endpoint of the service a Streamable HTTP session may use: the URL
// and the connection pool of its host.
type instance struct {
	url string
	hc  *fasthttp.HostClient
}

// instances returns the dialer's endpoints for session index, starting with the one the
// session opens on: with several URLs (Options.URLs) sessions are spread over them in
// turn, and each moves to the next when its own stops answering. The orders are made
// once per Dialer (one per URL) and shared by the sessions that start on the same
// instance: nothing is parsed or allocated per session.
func (d *Dialer) instances(index int) []instance {
	d.orders.Do(func() {
		all := d.urls()
		d.order = make([][]instance, len(all))
		for first := range all {
			d.order[first] = make([]instance, len(all))
			for i := range all {
				u := all[(first+i)%len(all)]
				pu, _ := url.Parse(u) // validated by withDefaults
				d.order[first][i] = instance{url: u, hc: d.hostClient(pu)}
			}
		}
	})
	return d.order[index%len(d.order)]
}

// urls is Options.URL followed by Options.URLs, without repeats.
func (d *Dialer) urls() []string {
	out := []string{d.o.URL}
	for _, u := range d.o.URLs {
		seen := false
		for _, v := range out {
			seen = seen || v == u
		}
		if !seen {
			out = append(out, u)
		}
	}
	return out
}

// instance returns the endpoint the session uses now and its position.
func (s *httpSession) instance() (instance, int32) {
	at := s.at.Load()
	return s.insts[at], at
}

// failover moves the session from the instance at position from to the next one, the
// specification's client behaviour when a server stops answering: the session keeps
// its id (the next instance of the same service carries it on) and its stream resumes
// there with Last-Event-ID. A session that another goroutine already moved stays where
// it is. It reports whether there is another instance to go to.
func (s *httpSession) failover(from int32) bool {
	n := int32(len(s.insts))
	if n < 2 {
		return false
	}
	if s.at.CompareAndSwap(from, (from+1)%n) {
		s.moves.Add(1)
	}
	return true
}

// unanswered reports whether err says that the instance did not answer at all: the
// connection was refused, or closed or reset before the first byte of a response.
// The request was then not carried out by that instance (it is gone), so it may be sent
// to the next one; any other failure is reported as it is.
func unanswered(err error) bool {
	var op *net.OpError
	switch {
	case errors.Is(err, fasthttp.ErrConnectionClosed), errors.Is(err, syscall.ECONNREFUSED),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE), errors.Is(err, io.EOF),
		errors.Is(err, io.ErrUnexpectedEOF):
		return true
	case errors.As(err, &op) && op.Op == "dial":
		return true
	}
	return false
}
