package main

import (
	"net"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// serve runs h on a loopback listener until the test ends and returns its address.
func serve(t *testing.T, h fasthttp.RequestHandler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &fasthttp.Server{Handler: h}
	go srv.Serve(ln) //nolint:errcheck // ends with the listener
	t.Cleanup(func() { _ = srv.Shutdown() })
	return ln.Addr().String()
}

// TestRelay: a POST goes upstream as it came (path, body, the session header) and its
// response comes back (status, body, headers); an upstream that is down is a 502.
func TestRelay(t *testing.T) {
	up := serve(t, func(ctx *fasthttp.RequestCtx) {
		if string(ctx.Path()) != "/mcp" || !ctx.IsPost() {
			ctx.Error("unexpected "+string(ctx.Method())+" "+string(ctx.Path()), fasthttp.StatusNotFound)
			return
		}
		ctx.Response.Header.Set("Mcp-Session-Id", "s-"+string(ctx.Request.Header.Peek("Mcp-Session-Id")))
		ctx.SetContentType("application/json")
		ctx.SetStatusCode(fasthttp.StatusAccepted)
		ctx.SetBody(append([]byte("echo:"), ctx.PostBody()...))
	})
	front := serve(t, relay(&fasthttp.HostClient{Addr: up}))

	for i := range 3 { // the upstream connection is kept and used again
		req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		req.SetRequestURI("http://" + front + "/mcp")
		req.Header.SetMethod(fasthttp.MethodPost)
		req.Header.Set("Mcp-Session-Id", "abc")
		req.SetBodyString(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)
		if err := fasthttp.DoTimeout(req, resp, 5*time.Second); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if resp.StatusCode() != fasthttp.StatusAccepted || string(resp.Body()) != `echo:{"jsonrpc":"2.0","id":1,"method":"ping"}` ||
			string(resp.Header.Peek("Mcp-Session-Id")) != "s-abc" {
			t.Fatalf("call %d: %d %q session %q", i, resp.StatusCode(), resp.Body(), resp.Header.Peek("Mcp-Session-Id"))
		}
		fasthttp.ReleaseRequest(req)
		fasthttp.ReleaseResponse(resp)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := ln.Addr().String()
	ln.Close() // nothing listens there now
	front2 := serve(t, relay(&fasthttp.HostClient{Addr: down}))
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI("http://" + front2 + "/mcp")
	req.Header.SetMethod(fasthttp.MethodPost)
	if err := fasthttp.DoTimeout(req, resp, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode() != fasthttp.StatusBadGateway {
		t.Fatalf("upstream down: %d %q, want 502", resp.StatusCode(), resp.Body())
	}
}
