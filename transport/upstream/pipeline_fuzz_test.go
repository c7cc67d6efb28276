package upstream

import (
	"bufio"
	"bytes"
	"io"
	"testing"
)

// FuzzPipelineReadResponse feeds arbitrary bytes to the pipelined connection's response
// reader, as a broken or hostile backend could send them: it must return an error or a
// response, never panic or loop, and an SSE body must read to an end.
func FuzzPipelineReadResponse(f *testing.F) {
	for _, s := range []string{
		"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}",
		"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n",
		"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\nX-T: 1\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n8\r\ndata: 1\n\n\r\n0\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\ndata: x\n\n",
		"HTTP/1.1 404 Not Found\r\nConnection: close\r\nContent-Length: 9\r\n\r\nnot found",
		"HTTP/1.1 200 OK\r\nContent-Length: 99999999\r\n\r\n{",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		pc := &pipeConn{br: bufio.NewReader(bytes.NewReader(data))}
		for range 4 {
			c := &pipeCall{}
			c.body.closed = make(chan bool, 1)
			if err := pc.readResponse(c, 1<<16); err != nil {
				return
			}
			if c.body.r != nil {
				if _, err := io.Copy(io.Discard, io.LimitReader(&c.body, 1<<20)); err != nil {
					return
				}
				_ = c.resp.CloseBodyStream()
			}
		}
	})
}
