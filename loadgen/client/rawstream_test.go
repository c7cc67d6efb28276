package client

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// rawServer answers a connection's request with reply, then waits for the client to
// close the connection and reports that on closed.
func rawServer(t *testing.T, reply string) (url string, closed <-chan struct{}) {
	return pipeServer(t, 1, reply, len(reply), false)
}

// pipeServer reads a connection's first n requests (bodies included), then writes
// reply in pieces of step bytes, then waits for the client to close the connection and
// reports that on closed. With hangUp it closes the connection after the reply instead,
// as a server does after an answer that says Connection: close.
func pipeServer(t *testing.T, n int, reply string, step int, hangUp bool) (url string, closed <-chan struct{}) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	done := make(chan struct{})
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		br := bufio.NewReader(c)
		for range n {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			io.Copy(io.Discard, req.Body)
		}
		for rest := reply; len(rest) > 0; {
			piece := rest[:min(step, len(rest))]
			rest = rest[len(piece):]
			if _, err := io.WriteString(c, piece); err != nil {
				// The client closed before the reply's last bytes (the chunk's closing
				// CRLF after the event it waited for): the peer's reset failed this write.
				close(done)
				return
			}
		}
		if hangUp {
			return
		}
		c.SetReadDeadline(time.Now().Add(20 * time.Second))
		_, err = io.Copy(io.Discard, c) // until the client closes
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			return // still open: the test's own wait reports it
		}
		close(done)
	}()
	return "http://" + ln.Addr().String() + "/mcp", done
}

// doStream reads a body framed each way a server may frame it, and closing the body
// closes the connection.
func TestDoStreamBodies(t *testing.T) {
	for _, tc := range []struct {
		name, reply, want string
	}{
		{"chunked", "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n" +
			"7\r\ndata: a\r\n2\r\n\n\n\r\n0\r\n\r\n", "data: a\n\n"},
		{"length", "HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 5\r\n\r\nnope!extra", "nope!"},
		{"until-close", "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\ndata: b\n\n", "data: b\n\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url, closed := rawServer(t, tc.reply)
			d, err := NewDialer(Options{URL: url})
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			req, _ := http.NewRequest(http.MethodGet, url, nil)
			resp, err := d.doStream(req)
			if err != nil {
				t.Fatal(err)
			}
			var got strings.Builder
			buf := make([]byte, 64)
			for got.Len() < len(tc.want) { // the server keeps the connection open: read what is due
				n, err := resp.Body.Read(buf)
				got.Write(buf[:n])
				if err != nil {
					break
				}
			}
			if got.String() != tc.want {
				t.Errorf("body %q, want %q", got.String(), tc.want)
			}
			resp.Body.Close()
			select {
			case <-closed:
			case <-time.After(10 * time.Second):
				t.Fatal("closing the body left the connection open")
			}
		})
	}
}

// The request's context ends a stream whose headers are in: its connection closes.
func TestDoStreamContextEndsIt(t *testing.T) {
	url, closed := rawServer(t, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
	d, err := NewDialer(Options{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := d.doStream(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	read := make(chan error, 1)
	go func() {
		_, err := resp.Body.Read(make([]byte, 16))
		read <- err
	}()
	cancel()
	select {
	case err := <-read:
		if err == nil {
			t.Error("a read on a cancelled stream succeeded")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the cancelled stream's read did not end")
	}
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("the cancelled stream's connection stayed open")
	}
}

// pipelined reads the answers to the requests before the stream's, whole, and the
// stream's headers, from a reply split at any point: a router's answers to
// notifications/initialized (202) and resources/subscribe (JSON), then its GET stream
// (chunked, priming event first) as a router writes them.
func TestPipelined(t *testing.T) {
	const reply = "HTTP/1.1 202 Accepted\r\nServer: mcprouter\r\nDate: Fri, 27 Nov 2026 17:00:00 GMT\r\nContent-Length: 0\r\n\r\n" +
		"HTTP/1.1 200 OK\r\nServer: mcprouter\r\nDate: Fri, 27 Nov 2026 17:00:00 GMT\r\nContent-Type: application/json\r\nContent-Length: 36\r\n\r\n" +
		`{"jsonrpc":"2.0","id":1,"result":{}}` +
		"HTTP/1.1 200 OK\r\nServer: mcprouter\r\nDate: Fri, 27 Nov 2026 17:00:00 GMT\r\nContent-Type: text/event-stream\r\n" +
		"Cache-Control: no-cache\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n" +
		"15\r\nid: 0-0\nretry: 1000\n\n\r\n"
	for _, step := range []int{1, 7, 100, len(reply)} {
		t.Run(fmt.Sprint(step), func(t *testing.T) {
			url, closed := pipeServer(t, 3, reply, step, false)
			d, err := NewDialer(Options{URL: url})
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			pre := []*fasthttp.Request{{}, {}}
			for i, body := range []string{`{"jsonrpc":"2.0","method":"notifications/initialized"}`, `{"jsonrpc":"2.0","id":1,"method":"resources/subscribe","params":{"uri":"memo://board"}}`} {
				pre[i].Header.SetMethod(fasthttp.MethodPost)
				pre[i].SetRequestURI(url)
				pre[i].SetBodyString(body)
			}
			resps := []*fasthttp.Response{{}, {}}
			var get fasthttp.Request
			get.SetRequestURI(url)
			var head fasthttp.ResponseHeader
			body, err := d.pipelined(context.Background(), strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/mcp"),
				time.Now().Add(10*time.Second), pre, resps, &get, &head)
			if err != nil {
				t.Fatal(err)
			}
			if resps[0].StatusCode() != 202 || resps[1].StatusCode() != 200 || string(resps[1].Body()) != `{"jsonrpc":"2.0","id":1,"result":{}}` {
				t.Errorf("answers %d %d %q", resps[0].StatusCode(), resps[1].StatusCode(), resps[1].Body())
			}
			if head.StatusCode() != 200 || head.ContentLength() != -1 || string(head.ContentType()) != "text/event-stream" {
				t.Errorf("stream's headers: %d, length %d, %q", head.StatusCode(), head.ContentLength(), head.ContentType())
			}
			const want = "id: 0-0\nretry: 1000\n\n"
			var got strings.Builder
			buf := make([]byte, 64)
			for got.Len() < len(want) {
				n, err := body.Read(buf)
				got.Write(buf[:n])
				if err != nil {
					break
				}
			}
			if got.String() != want {
				t.Errorf("stream %q, want %q", got.String(), want)
			}
			body.Close()
			select {
			case <-closed:
			case <-time.After(10 * time.Second):
				t.Fatal("closing the stream left the connection open")
			}
		})
	}
}

// pipelined fails when the server ends the connection before the stream's answer.
func TestPipelinedCutShort(t *testing.T) {
	url, _ := pipeServer(t, 2, "HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", 1000, true)
	d, err := NewDialer(Options{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var post, get fasthttp.Request
	post.Header.SetMethod(fasthttp.MethodPost)
	post.SetRequestURI(url)
	get.SetRequestURI(url)
	var head fasthttp.ResponseHeader
	addr := strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/mcp")
	if _, err := d.pipelined(context.Background(), addr, time.Now().Add(10*time.Second),
		[]*fasthttp.Request{&post}, []*fasthttp.Response{{}}, &get, &head); err == nil {
		t.Fatal("a stream the server never answered opened")
	}
}
