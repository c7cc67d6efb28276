package ping

import (
	"errors"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/mcprouter/mcprouter/bench/internal/rpccheck"
	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/internal/testbin"
)

// TestPongCheck: the check the ping benchmarks make on every answer accepts both servers'
// replies to a ping and rejects a 200 answer that is not the ping's result, even one
// about as long as the expected reply (what the former length check let through).
func TestPongCheck(t *testing.T) {
	testbin.Long(t, "starts a router")
	bareAddr, stop := startBare(t)
	defer stop()
	a := startRouter(t)
	var m codec.Message
	for _, tc := range []struct {
		name   string
		addr   string
		router bool
	}{{"bare", bareAddr, false}, {"router", a.Addr(), true}} {
		c := &fasthttp.HostClient{Addr: tc.addr, ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second}
		req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		sid := ""
		if tc.router {
			sid = initialize(t, c)
		}
		setup(req, tc.addr, sid)
		req.SetBody(pingBody)
		if err := pong(c, req, resp, &m); err != nil {
			t.Errorf("%s: ping: %v", tc.name, err)
		}
		if tc.router {
			// Same id, an unknown method: status 200 with a JSON-RPC error.
			req.SetBodyString(`{"jsonrpc":"2.0","id":1,"method":"pong"}`)
			if err := pong(c, req, resp, &m); !errors.Is(err, rpccheck.ErrNotResult) || resp.StatusCode() != fasthttp.StatusOK {
				t.Errorf("unknown method: status %d, %v; want 200 and ErrNotResult", resp.StatusCode(), err)
			}
		}
		fasthttp.ReleaseRequest(req)
		fasthttp.ReleaseResponse(resp)
	}
}
