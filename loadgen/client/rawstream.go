package client

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"sync"
)

// streamBufSize is the buffer a stream's response headers are read through (pooled;
// a held chunked stream keeps none, see chunkedBody); the SSE reader above it has its
// own (streamReadBuf).
const streamBufSize = 2048

// doStream sends a request whose response is a long-lived stream (a GET stream, a
// subscriptions/listen POST) and returns once its headers are in. Over plain HTTP it
// uses a connection of its own, read by the caller's goroutine through a small buffer:
// net/http's transport would add a read and a write goroutine and 8 KiB of buffers per
// connection, which a load generator holding 100,000 streams pays 100,000 times. The
// request's context bounds the wait for the headers and, once done, ends the stream
// (the connection is closed). Over HTTPS it goes through net/http.
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
	// A chunked body (every held stream) is read from the connection itself, with what
	// the header reader read past the headers first, and the header reader goes back
	// to the pool: a held stream keeps no buffer of its own but its SSE reader's.
	var body io.Reader
	switch {
	case len(resp.TransferEncoding) > 0 && resp.TransferEncoding[0] == "chunked":
		cb := &chunkedBody{r: conn}
		if n := br.Buffered(); n > 0 {
			ahead, _ := br.Peek(n)
			cb.pending = bytes.Clone(ahead)
		}
		putReader(br)
		body = cb
	case resp.ContentLength >= 0:
		body = io.LimitReader(br, resp.ContentLength)
	default:
		body = br
	}
	resp.Body = &streamBody{Reader: body, conn: conn, stop: stop}
	return resp, nil
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
