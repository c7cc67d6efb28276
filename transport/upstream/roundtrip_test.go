package upstream

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/mcprouter/mcprouter/codec"
)

// keepAliveBackend answers every request on a connection with reply (a JSON body with
// a Content-Length) until the client closes it, and counts the connections it accepted.
func keepAliveBackend(t *testing.T, reply func(id string) string) (url string, conns *atomic.Int32) {
	conns = new(atomic.Int32)
	addr := rawBackend(t, func(c net.Conn) {
		defer c.Close()
		conns.Add(1)
		br := bufio.NewReader(c)
		for range 100 {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			body, _ := io.ReadAll(req.Body)
			var m codec.Message
			_ = codec.Scan(body, &m)
			r := reply(string(m.ID))
			fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(r), r)
		}
	})
	return "http://" + addr + "/mcp", conns
}

// TestHTTPRepliesKeepConnection: a connection goes back to the pool after a reply read
// whole from the read buffer and after one streamed (larger than the buffer), and the
// next calls use it.
func TestHTTPRepliesKeepConnection(t *testing.T) {
	for _, pad := range []int{0, 3 * defaultReadBuffer} {
		t.Run(fmt.Sprint("pad ", pad), func(t *testing.T) {
			url, conns := keepAliveBackend(t, func(id string) string {
				return `{"jsonrpc":"2.0","id":` + id + `,"result":{"pad":"` + strings.Repeat("x", pad) + `"}}`
			})
			c, s := dialHTTP(t, url, HTTPOptions{})
			defer c.Close()
			for i := 1; i <= 5; i++ {
				if err := c.Send(testCtx(t), []byte(msgCall(i, "echo", "hi"))); err != nil {
					t.Fatalf("call %d: %v", i, err)
				}
				s.waitResponse(t, fmt.Sprint(i))
			}
			if n := conns.Load(); n != 1 {
				t.Fatalf("%d connections for 5 calls in a row, want 1", n)
			}
		})
	}
}

// defaultReadBuffer is fasthttp's read buffer of a pooled connection.
const defaultReadBuffer = 4096

// fuzzConn is a connection whose peer sends data and takes whatever is written.
type fuzzConn struct {
	r      *bytes.Reader
	closed atomic.Bool
}

func (c *fuzzConn) Read(p []byte) (int, error) {
	if c.closed.Load() {
		return 0, net.ErrClosed
	}
	return c.r.Read(p)
}
func (c *fuzzConn) Write(p []byte) (int, error)      { return len(p), nil }
func (c *fuzzConn) Close() error                     { c.closed.Store(true); return nil }
func (c *fuzzConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (c *fuzzConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (c *fuzzConn) SetDeadline(time.Time) error      { return nil }
func (c *fuzzConn) SetReadDeadline(time.Time) error  { return nil }
func (c *fuzzConn) SetWriteDeadline(time.Time) error { return nil }

// exchangeBytes runs a POST through exchangeOn on a connection whose backend sends data,
// and reads the reply's body (whole, or streamed to its end).
func exchangeBytes(data []byte) (status int, contentType string, body []byte, err error) {
	hc := &fasthttp.HostClient{
		Addr: "backend",
		Dial: func(string) (net.Conn, error) { return &fuzzConn{r: bytes.NewReader(data)}, nil },
		// the pool's cleaner goroutine ends a millisecond after the last connection
		MaxIdleConnDuration: time.Millisecond,
	}
	defer hc.CloseIdleConnections()
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI("http://backend/mcp")
	req.Header.SetMethod(fasthttp.MethodPost)
	req.SetBodyString(`{}`)
	if err := exchangeOn(hc, req, resp, time.Time{}, 0, fuzzMaxBody); err != nil {
		return 0, "", nil, err
	}
	if s := resp.BodyStream(); s != nil {
		body, err = io.ReadAll(io.LimitReader(s, 1<<20))
		_ = resp.CloseBodyStream()
	} else {
		body = append([]byte(nil), resp.Body()...)
	}
	return resp.StatusCode(), string(resp.Header.ContentType()), body, err
}

// FuzzExchange: arbitrary bytes from a backend give an error or a response, never a
// panic or a loop; and a response a reference encoder made (status, body, framing,
// JSON or SSE) reads back as exactly that, whether its body was read whole from the
// read buffer or streamed.
func FuzzExchange(f *testing.F) {
	seedResponses(f,
		"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n",
		"HTTP/1.1 204 No Content\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n{}")
	f.Add([]byte{}, uint8(1), bytes.Repeat([]byte("x"), 3*defaultReadBuffer), uint8(0), false)
	f.Fuzz(func(t *testing.T, data []byte, statusPick uint8, body []byte, chunk uint8, sse bool) {
		_, _, _, _ = exchangeBytes(data)

		first, ok := generatedResponse(statusPick, body, chunk, sse)
		if !ok {
			return
		}
		gotStatus, gotType, gotBody, err := exchangeBytes(first)
		checkReadBack(t, first, chunk, gotStatus, gotType, gotBody, err)
	})
}

// The pool's own exchange over TLS (an https backend URL), without pipelining.
func TestHTTPPoolTLS(t *testing.T) {
	echoOverTLS(t, HTTPOptions{})
}

// TestExchangeInterimResponses: interim responses are passed over up to a bound; a
// backend that sends only interim responses, or switches protocols, fails the exchange
// rather than leaving what follows on the connection for the next request.
func TestExchangeInterimResponses(t *testing.T) {
	final := "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
	for _, tc := range []struct {
		name, reply string
		ok          bool
	}{
		{"two interim", strings.Repeat("HTTP/1.1 100 Continue\r\n\r\n", 2) + final, true},
		{"the most interim", strings.Repeat("HTTP/1.1 102 Processing\r\n\r\n", maxInterim) + final, true},
		{"too many interim", strings.Repeat("HTTP/1.1 100 Continue\r\n\r\n", maxInterim+1) + final, false},
		{"switching protocols", "HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\n" + final, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, _, body, err := exchangeBytes([]byte(tc.reply))
			if tc.ok != (err == nil) || tc.ok && (status != 200 || string(body) != "{}") {
				t.Fatalf("got %d %q %v", status, body, err)
			}
		})
	}
}
