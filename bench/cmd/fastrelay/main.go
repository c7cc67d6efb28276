// Command fastrelay is the least a reverse proxy built on fasthttp costs: a fasthttp
// server whose handler hands each request to a keep-alive fasthttp.HostClient and
// copies the response back (HostClient.Do), knowing nothing of MCP. bench/compare runs
// it in front of mcpbackend beside haproxy, nginx and mcprouter (target
// "fasthttp-relay"), so that the CPU a forwarded call costs the router can be read
// against what the same libraries cost with no work of the router's at all: the floor
// of a hop on the stack the router is built on.
//
//	fastrelay --listen 127.0.0.1:0 --upstream http://127.0.0.1:8080/mcp
//
// It prints "fastrelay serving on http://ADDR/PATH" once it accepts connections, PATH
// being the upstream URL's, and runs until SIGINT or SIGTERM. Bodies are whole (no
// streaming): a POST answered with JSON, as the benchmark's echo calls are.
package main

import (
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on")
	upstream := flag.String("upstream", "", "URL of the server to relay to (http only), e.g. http://127.0.0.1:8080/mcp")
	flag.Parse()
	u, err := url.Parse(*upstream)
	if err != nil || u.Scheme != "http" || u.Host == "" {
		log.Fatalf("fastrelay: --upstream must be an http:// URL, got %q", *upstream)
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	srv := &fasthttp.Server{
		Handler:     relay(&fasthttp.HostClient{Addr: u.Host, MaxConns: 4096, ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second}),
		Name:        "fastrelay",
		ReadTimeout: time.Minute,
		IdleTimeout: time.Minute,
	}
	fmt.Printf("fastrelay serving on http://%s%s\n", ln.Addr(), u.Path)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sig
		_ = srv.Shutdown()
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, net.ErrClosed) {
		log.Fatal(err)
	}
}

// relay returns the handler: the request goes upstream as it came (its Connection
// header dropped: hop-by-hop), the response comes back the same way; an upstream that
// cannot be reached is a 502.
func relay(hc *fasthttp.HostClient) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		req, resp := &ctx.Request, &ctx.Response
		req.Header.Del(fasthttp.HeaderConnection)
		if err := hc.Do(req, resp); err != nil {
			ctx.Error("fastrelay: upstream: "+err.Error(), fasthttp.StatusBadGateway)
			return
		}
		resp.Header.Del(fasthttp.HeaderConnection)
	}
}
