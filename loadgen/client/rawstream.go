package client

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
)

// streamBufSize is the buffer a stream's response headers are read through (pooled;
// a held chunked stream keeps none, see chunkedBody); the SSE reader above it has its
// own (streamReadBuf).
const streamBufSize = 2048

// doStream sends a request whose response is a long-lived stream (a legacy SSE GET, a
// subscriptions/listen POST, a GET stream over HTTPS) and returns once its headers are
// in. Over plain HTTP it uses a connection of its own, read by the caller's goroutine
// through a small buffer: net/http's transport would add a read and a write goroutine
// and 8 KiB of buffers per connection, which a load generator holding 100,000 streams
// pays 100,000 times. The request's context bounds the wait for the headers and, once
// done, ends the stream (the connection is closed). Over HTTPS it goes through
// net/http.
func (d *Dialer) doStream(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme != "http" {
		return d.streams.Do(req)
	}
	ctx := req.Context()
	addr := req.URL.Host
	if req.URL.Port() == "" {
		addr = net.JoinHostPort(req.URL.Hostname(), "80")
	}
	conn, err := d.src.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	fail := func(err error) (*http.Response, error) {
		stop()
		conn.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	if err := writeRequest(req, conn); err != nil {
		return fail(err)
	}
	br := readerPool.Get().(*bufio.Reader)
	br.Reset(conn)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		putReader(br)
		return fail(err)
	}
	// The body is read here rather than through resp.Body, whose chunked reader keeps
	// the whole response (headers, request) for the trailer: a few KiB per held stream.
	chunked := len(resp.TransferEncoding) > 0 && resp.TransferEncoding[0] == "chunked"
	resp.Body = heldBody(br, conn, chunked, resp.ContentLength, stop)
	return resp, nil
}

// heldBody is a stream's body, read from its connection conn after its headers were
// read through br (from readerPool). A chunked body (every held stream) is read from the
// connection itself, with what br read past the headers first, and br goes back to the
// pool: a held stream keeps no buffer of its own but its SSE reader's. A body of known
// length (length >= 0: an error's) or one that lasts until the connection closes is
// read through br. Closing the body runs stop and closes the connection.
func heldBody(br *bufio.Reader, conn net.Conn, chunked bool, length int64, stop func() bool) io.ReadCloser {
	var body io.Reader
	switch {
	case chunked:
		cb := &chunkedBody{r: conn}
		if n := br.Buffered(); n > 0 {
			ahead, _ := br.Peek(n)
			cb.pending = bytes.Clone(ahead)
		}
		putReader(br)
		body = cb
	case length >= 0:
		body = io.LimitReader(br, length)
	default:
		body = br
	}
	return &streamBody{Reader: body, conn: conn, stop: stop}
}

// readerPool holds the buffers a stream's response headers are read through.
var readerPool = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, streamBufSize) }}

func putReader(br *bufio.Reader) {
	br.Reset(nil)
	readerPool.Put(br)
}

// writerPool holds the buffers a stream's request is written through: net/http would
// make a 4 KiB one for every request written to a bare connection.
var writerPool = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 2048) }}

// writeRequest writes req to conn in one write, through a pooled buffer.
func writeRequest(req *http.Request, conn net.Conn) error {
	bw := writerPool.Get().(*bufio.Writer)
	bw.Reset(conn)
	err := req.Write(bw)
	if err == nil {
		err = bw.Flush()
	}
	bw.Reset(nil)
	writerPool.Put(bw)
	return err
}

// streamBody is a stream's body: closing it closes its connection.
type streamBody struct {
	io.Reader
	conn net.Conn
	stop func() bool
}

func (b *streamBody) Close() error {
	b.stop()
	return b.conn.Close()
}

// pipelined sends pre and then last on a new plain-HTTP connection to addr, in one
// write (HTTP/1.1 pipelining: the server answers them in order), reads the whole
// answers to pre into preResps (bodies up to Options.MaxMessage) and the headers of
// last's into lastHeader, and returns last's body: a stream, read from the connection
// for as long as it lasts, closed with the connection, and also when ctx ends. The
// deadline bounds the exchange up to last's headers. Over a bare connection with
// fasthttp's request and response objects, a stream costs no net/http request, context
// or timer, and requests that a server answers at once share its write.
func (d *Dialer) pipelined(ctx context.Context, addr string, deadline time.Time, pre []*fasthttp.Request,
	preResps []*fasthttp.Response, last *fasthttp.Request, lastHeader *fasthttp.ResponseHeader) (io.ReadCloser, error) {
	conn, err := d.src.Dial(addr)
	if err != nil {
		return nil, err
	}
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	fail := func(err error) (io.ReadCloser, error) {
		stop()
		conn.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	conn.SetDeadline(deadline)
	if err := writeRequests(conn, pre, last); err != nil {
		return fail(err)
	}
	br := readerPool.Get().(*bufio.Reader)
	br.Reset(conn)
	for _, resp := range preResps {
		if err := resp.ReadLimitBody(br, d.o.MaxMessage); err != nil {
			putReader(br)
			return fail(err)
		}
	}
	if err := lastHeader.Read(br); err != nil {
		putReader(br)
		return fail(err)
	}
	conn.SetDeadline(time.Time{})
	return heldBody(br, conn, lastHeader.ContentLength() == -1, int64(lastHeader.ContentLength()), stop), nil
}

// writeRequests writes pre and last to conn in one write, through a pooled buffer.
func writeRequests(conn net.Conn, pre []*fasthttp.Request, last *fasthttp.Request) error {
	bw := writerPool.Get().(*bufio.Writer)
	bw.Reset(conn)
	var err error
	for _, r := range pre {
		if err = r.Write(bw); err != nil {
			break
		}
	}
	if err == nil {
		err = last.Write(bw)
	}
	if err == nil {
		err = bw.Flush()
	}
	bw.Reset(nil)
	writerPool.Put(bw)
	return err
}
