package memhttp

import (
	"io"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

func TestStart(t *testing.T) {
	s := Start(t, &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) { ctx.WriteString("hello") }}, 10*time.Second)
	resp, err := s.Client.Get("http://anywhere/x")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if b, _ := io.ReadAll(resp.Body); string(b) != "hello" {
		t.Errorf("body %q", b)
	}
}
