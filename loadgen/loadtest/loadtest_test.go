package loadtest

import (
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

func post(s *Server, body string) *fasthttp.RequestCtx {
	var ctx fasthttp.RequestCtx
	ctx.Request.Header.SetMethod(fasthttp.MethodPost)
	ctx.Request.SetRequestURI("/mcp")
	ctx.Request.SetBodyString(body)
	s.Handler(&ctx)
	return &ctx
}

func TestHandler(t *testing.T) {
	s := &Server{}
	tests := []struct {
		body   string
		status int
		want   string
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}`, 200, `"protocolVersion":"2025-06-18"`},
		{`{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":"1999-01-01"}}`, 200, `"protocolVersion":"2025-11-25"`},
		{`{"jsonrpc":"2.0","method":"notifications/initialized"}`, 202, ``},
		{`{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":"echo"}}`, 200, `{"jsonrpc":"2.0","id":"x","result":{"content":[{"type":"text","text":"ok"}]}}`},
		{`{"jsonrpc":"2.0","id":3,"method":"ping"}`, 200, `"result":{}`},
		{`{"jsonrpc":"2.0","id":4,"method":"tools/list"}`, 200, `"name":"echo"`},
		{`{"jsonrpc":"2.0","id":5,"method":"nope"}`, 200, `"code":-32601`},
		{`not json`, 400, `"code":-32700`},
	}
	for _, tt := range tests {
		ctx := post(s, tt.body)
		if got := ctx.Response.StatusCode(); got != tt.status {
			t.Errorf("%s: status %d, want %d", tt.body, got, tt.status)
		}
		if body := string(ctx.Response.Body()); !strings.Contains(body, tt.want) {
			t.Errorf("%s: body %s lacks %s", tt.body, body, tt.want)
		}
	}
	if s.Calls() != 1 || s.Sessions() != 2 || s.Requests() != 6 {
		t.Errorf("calls %d sessions %d requests %d", s.Calls(), s.Sessions(), s.Requests())
	}
}

func TestSSEFraming(t *testing.T) {
	s := &Server{opts: Options{SSE: true}}
	ctx := post(s, `{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	if ct := string(ctx.Response.Header.ContentType()); ct != "text/event-stream" {
		t.Errorf("content type %q", ct)
	}
	if body := string(ctx.Response.Body()); body != "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n" {
		t.Errorf("body %q", body)
	}
}

func TestStall(t *testing.T) {
	s := &Server{opts: Options{StallEvery: 3, StallFor: 30 * time.Millisecond}}
	var slow []int
	for i := 1; i <= 6; i++ {
		start := time.Now()
		post(s, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}`)
		if time.Since(start) >= 30*time.Millisecond {
			slow = append(slow, i)
		}
	}
	// A sleep is never shorter than asked, so calls 3 and 6 are slow for sure; a busy
	// machine may make others slow too, so only those two are required.
	if !contains(slow, 3) || !contains(slow, 6) {
		t.Errorf("slow calls %v, want 3 and 6 among them", slow)
	}
}

func contains(v []int, x int) bool {
	for _, e := range v {
		if e == x {
			return true
		}
	}
	return false
}

func TestMethods(t *testing.T) {
	s := &Server{}
	var ctx fasthttp.RequestCtx
	ctx.Request.Header.SetMethod(fasthttp.MethodGet)
	s.Handler(&ctx)
	if ctx.Response.StatusCode() != fasthttp.StatusMethodNotAllowed {
		t.Errorf("GET: %d", ctx.Response.StatusCode())
	}
	ctx.Response.Reset()
	ctx.Request.Header.SetMethod(fasthttp.MethodDelete)
	s.Handler(&ctx)
	if ctx.Response.StatusCode() != fasthttp.StatusOK {
		t.Errorf("DELETE: %d", ctx.Response.StatusCode())
	}
}

func TestStartClose(t *testing.T) {
	s, err := Start("127.0.0.1:0", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(s.URL(), "http://127.0.0.1:") || !strings.HasSuffix(s.URL(), "/mcp") {
		t.Errorf("URL %q", s.URL())
	}
	if err := s.Close(); err != nil {
		t.Error(err)
	}
}

func BenchmarkHandler(b *testing.B) {
	s := &Server{}
	body := []byte(`{"jsonrpc":"2.0","id":12345,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`)
	var ctx fasthttp.RequestCtx
	ctx.Request.Header.SetMethod(fasthttp.MethodPost)
	ctx.Request.SetBody(body)
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		ctx.Response.Reset()
		s.Handler(&ctx)
	}
}
