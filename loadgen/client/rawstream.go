package client

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
)

// streamBufSize is the read buffer of a held stream's connection (headers, chunk
// framing); the SSE reader above it has its own (streamReadBuf).
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
	if err := req.Write(conn); err != nil {
		return fail(err)
	}
	br := bufio.NewReaderSize(conn, streamBufSize)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		return fail(err)
	}
	// The body is read here rather than through resp.Body, whose chunked reader keeps
	// the whole response (headers, request) for the trailer: a few KiB per held stream.
	var body io.Reader = br
	switch {
	case len(resp.TransferEncoding) > 0 && resp.TransferEncoding[0] == "chunked":
		body = httputil.NewChunkedReader(br)
	case resp.ContentLength >= 0:
		body = io.LimitReader(br, resp.ContentLength)
	}
	resp.Body = &streamBody{Reader: body, conn: conn, stop: stop}
	return resp, nil
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
