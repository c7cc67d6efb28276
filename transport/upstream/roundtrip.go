package upstream

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

// exchangeOn runs one exchange of req on a connection of hc's pool, as hc.Do would with
// a streamed response body, and with the same retries: an exchange that failed before
// any response is tried again (at most fasthttp.DefaultMaxIdemponentCallAttempts times)
// when the request was not a POST, or when nothing of it was sent (errStaleConn).
//
// Why not hc.Do: its transport wraps every streamed body in a stream object and three
// closures (four allocations per forwarded call, the router's whole garbage under load,
// bench/RESULTS.md "compare notes") and reads the clock four times turning the request's
// deadline into a timeout and back. Here the deadline is handed down as it is, and a
// reply whose body is already whole in the read buffer (a JSON reply of at most whole
// bytes with a Content-Length, the usual answer to a call) is read into resp without a
// stream, and the connection goes back to the pool at once: resp.BodyStream() is then
// nil and resp.Body() holds the body. Any other body (an SSE reply, a chunked one, one
// still coming, or every one when whole is 0) is streamed as fasthttp streams it: the
// connection is the body's until the body is closed, and a close interrupts a read in
// progress (pooledStream).
//
// timeout is the time to dl (0 for none), which bounds the wait for a free connection
// and a dial.
func exchangeOn(hc *fasthttp.HostClient, req *fasthttp.Request, resp *fasthttp.Response, dl time.Time, timeout time.Duration, whole int) error {
	if len(req.Header.UserAgent()) == 0 {
		req.Header.SetUserAgent(hc.Name)
	}
	req.URI().DisablePathNormalizing = hc.DisablePathNormalizing
	for attempt := 1; ; attempt++ {
		retry, err := roundTripOn(hc, req, resp, dl, timeout, whole)
		if err == nil {
			return nil
		}
		if !retry || attempt >= fasthttp.DefaultMaxIdemponentCallAttempts || !mayResend(req, err) {
			if err == io.EOF {
				err = fasthttp.ErrConnectionClosed
			}
			return err
		}
		if !dl.IsZero() && !time.Now().Before(dl) {
			return fasthttp.ErrTimeout
		}
	}
}

// mayResend reports whether req, whose exchange failed with err before any response,
// may be sent again on another connection: any request but a POST, and a POST of which
// nothing was sent (errStaleConn). The pool's RetryIfErr and exchangeOn share it.
func mayResend(req *fasthttp.Request, err error) bool {
	return !req.Header.IsPost() || errors.Is(err, errStaleConn)
}

// roundTripOn is one attempt of exchangeOn; retry reports a failure that may be tried
// again on another connection (as fasthttp's transport reports it).
func roundTripOn(hc *fasthttp.HostClient, req *fasthttp.Request, resp *fasthttp.Response, dl time.Time, timeout time.Duration, whole int) (retry bool, err error) {
	resp.Reset()
	cc, err := hc.AcquireConn(timeout, req.ConnectionClose())
	if err != nil {
		return false, err
	}
	conn := cc.Conn()
	if err := conn.SetWriteDeadline(dl); err != nil {
		hc.CloseConn(cc)
		return true, err
	}
	bw := hc.AcquireWriter(conn)
	err = req.Write(bw)
	if err == nil {
		err = bw.Flush()
	}
	hc.ReleaseWriter(bw)
	if err != nil {
		hc.CloseConn(cc)
		if isTimeout(err) {
			err = fasthttp.ErrTimeout
		}
		return true, err
	}
	if err := conn.SetReadDeadline(dl); err != nil {
		hc.CloseConn(cc)
		return true, err
	}
	br := hc.AcquireReader(conn)
	if err := readHead(resp, br); err != nil {
		hc.ReleaseReader(br)
		hc.CloseConn(cc)
		return true, err
	}
	closeConn := req.ConnectionClose() || resp.ConnectionClose()
	cl := resp.Header.ContentLength()
	if bodyless := noBody(resp.StatusCode()); bodyless ||
		cl >= 0 && cl <= whole && cl <= br.Buffered() && !isSSE(resp) {
		if !bodyless {
			err = resp.ReadBody(br, 0) // from memory
		}
		hc.ReleaseReader(br)
		if err != nil || closeConn {
			hc.CloseConn(cc)
			return err != nil, err
		}
		hc.ReleaseConn(cc)
		return false, nil
	}
	s := acquireStream(resp)
	if err := s.resp.ReadBody(br, 0); err != nil { // a streamed body: cannot fail
		s.put()
		hc.ReleaseReader(br)
		hc.CloseConn(cc)
		return true, err
	}
	s.r, s.conn, s.fullyRead = s.resp.BodyStream(), conn, cl == 0
	s.release = func(discard bool) {
		hc.ReleaseReader(br)
		if discard || closeConn {
			hc.CloseConn(cc)
		} else {
			hc.ReleaseConn(cc)
		}
	}
	resp.SetBodyStream(s, cl)
	return false, nil
}

// readHead reads a response's head from br into resp, passing over interim (1xx)
// responses. A connection that gives no final response after a few interim ones, or
// switches protocols, is an error: what follows on it is no HTTP/1.1 response.
func readHead(resp *fasthttp.Response, br *bufio.Reader) error {
	for range maxInterim + 1 {
		if err := resp.Header.Read(br); err != nil {
			return err
		}
		switch s := resp.StatusCode(); {
		case s >= 200:
			return nil
		case s == fasthttp.StatusSwitchingProtocols:
			return errSwitched
		}
	}
	return errInterim
}

// maxInterim bounds the interim responses passed over before a final one.
const maxInterim = 8

var (
	errInterim  = errors.New("upstream: interim responses without a final one")
	errSwitched = errors.New("upstream: the backend switched protocols")
)

// noBody reports a status whose responses have no body.
func noBody(status int) bool {
	return status < 200 || status == fasthttp.StatusNoContent || status == fasthttp.StatusNotModified
}

// isSSE reports a successful response that is an SSE stream.
func isSSE(resp *fasthttp.Response) bool {
	return resp.StatusCode()/100 == 2 && bytes.HasPrefix(resp.Header.ContentType(), []byte("text/event-stream"))
}

// pooledStream is a response body streamed from a pooled connection, which stays the
// body's until it is closed. It keeps what fasthttp's own streamed bodies do: reads
// are serialised, and CloseWithError from another goroutine (a cancelled call, a
// stream that lingers after its response) interrupts a read in progress by closing the
// connection and waits for that read to return before anything is released; the
// connection goes back to the pool only when the body was read to its end and closed
// without an error.
type pooledStream struct {
	resp      *fasthttp.Response // a head's copy that owns fasthttp's body reader
	r         io.Reader          // resp's body stream
	conn      net.Conn           // closed to interrupt a read
	release   func(discard bool)
	closed    atomic.Bool
	fullyRead bool
	mu        sync.Mutex // held by a read
	once      sync.Once
}

// acquireStream makes the stream of resp's body: its reader goes into a copy of resp's
// head, so that resp can carry the stream itself (resp.SetBodyStream would close one
// of its own).
func acquireStream(resp *fasthttp.Response) *pooledStream {
	s := &pooledStream{resp: fasthttp.AcquireResponse()}
	resp.Header.CopyTo(&s.resp.Header)
	s.resp.StreamBody = true
	return s
}

// put gives back the head's copy and its body reader.
func (s *pooledStream) put() {
	_ = s.resp.CloseBodyStream()
	fasthttp.ReleaseResponse(s.resp)
}

func (s *pooledStream) Read(p []byte) (int, error) {
	if s.closed.Load() {
		return 0, io.ErrClosedPipe
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return 0, io.ErrClosedPipe
	}
	n, err := s.r.Read(p)
	if err == io.EOF {
		s.fullyRead = true
	}
	return n, err
}

// CloseWithError implements fasthttp.ReadCloserWithError; resp.CloseBodyStream (and
// fasthttp.ReleaseResponse) call it with nil.
func (s *pooledStream) CloseWithError(err error) error {
	s.once.Do(func() {
		s.closed.Store(true)
		locked := s.mu.TryLock()
		discard := err != nil || !locked || !s.fullyRead
		if discard {
			_ = s.conn.Close()
		}
		if !locked {
			s.mu.Lock() // the interrupt ends the read that holds it
		}
		defer s.mu.Unlock()
		discard = discard || s.resp.ConnectionClose() // trailers may say so
		s.put()
		s.release(discard)
	})
	return nil
}
