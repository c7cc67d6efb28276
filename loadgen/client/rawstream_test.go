package client

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// rawServer answers each connection's request with reply, then waits for the client
// to close the connection and reports that on closed.
func rawServer(t *testing.T, reply string) (url string, closed <-chan struct{}) {
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
		if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
			return
		}
		io.WriteString(c, reply)
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		io.Copy(io.Discard, c) // until the client closes
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
