package client

import (
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/loadgen/sdktest"
)

func TestMain(m *testing.M) { sdktest.Main(m) }

// target is one way to reach the SDK test server.
type target struct {
	name     string
	opts     Options
	protocol string // expected negotiated revision
	stream   bool   // supports a standalone GET stream / notifications
}

// targets starts the SDK server in every mode mcpload supports and returns the ways to
// reach it. Servers are closed at the end of the test.
func targets(t *testing.T, c *sdktest.Counters) []target {
	t.Helper()
	start := func(mode sdktest.Mode) string {
		ts := sdktest.StartHTTP(sdktest.NewServer(c, 3, 2), mode)
		t.Cleanup(ts.Close)
		return ts.URL + "/mcp"
	}
	sessionSSE, sessionJSON, stateless, legacy := start(sdktest.SessionSSE), start(sdktest.SessionJSON), start(sdktest.Stateless), start(sdktest.LegacySSE)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return []target{
		{"http/session/sse-replies", Options{URL: sessionSSE, Stream: true}, Version20251125, true},
		{"http/session/json-replies", Options{URL: sessionJSON, Stream: true}, Version20251125, true},
		{"http/session/2025-03-26", Options{URL: sessionJSON, Protocol: Version20250326}, Version20250326, false},
		{"http/stateless/2025-11-25", Options{URL: stateless}, Version20251125, false},
		{"http/stateless/2026-07-28", Options{URL: stateless, Protocol: Version20260728}, Version20260728, false},
		{"sse/legacy", Options{Transport: SSE, URL: legacy}, Version20241105, true},
		{"stdio", Options{Transport: Stdio, Command: []string{exe}, Env: []string{sdktest.StdioEnv + "=1"}}, Version20251125, false},
	}
}

// dialTest opens session index with o, or fails the test; the session and its Dialer
// are closed when the test (or benchmark run) ends.
func dialTest(t testing.TB, o Options, index int) Session {
	t.Helper()
	d, err := NewDialer(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	s, err := d.Dial(index, time.Now().Add(10*time.Second))
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { s.Close(time.Now().Add(5 * time.Second)) })
	return s
}

func TestSessionsAgainstSDK(t *testing.T) {
	var c sdktest.Counters
	for _, tg := range targets(t, &c) {
		t.Run(tg.name, func(t *testing.T) {
			s := dialTest(t, tg.opts, 0)
			deadline := time.Now().Add(10 * time.Second)
			if got := s.Info().Protocol; got != tg.protocol {
				t.Errorf("protocol %q, want %q", got, tg.protocol)
			}
			var rep Reply
			calls := []struct {
				req  Request
				want string // substring of the result
			}{
				{Request{Method: "tools/call", Name: []byte("echo"), Params: []byte(`{"name":"echo","arguments":{"text":"hi \"there\""}}`)}, `hi \"there\"`},
				{Request{Method: "ping"}, `{}`},
				{Request{Method: "tools/list"}, `"echo"`},
				{Request{Method: "resources/read", Name: []byte("test://r/1"), Params: []byte(`{"uri":"test://r/1"}`)}, `content`},
				{Request{Method: "prompts/get", Name: []byte("greet"), Params: []byte(`{"name":"greet","arguments":{"name":"bob"}}`)}, `hello bob`},
			}
			for _, call := range calls {
				if call.req.Method == "ping" && tg.protocol == Version20260728 {
					continue // removed in the stateless revision
				}
				if err := s.Call(&call.req, deadline, &rep); err != nil {
					t.Fatalf("%s: %v", call.req.Method, err)
				}
				if !strings.Contains(string(rep.Result), call.want) {
					t.Errorf("%s: result %s lacks %s", call.req.Method, rep.Result, call.want)
				}
			}
			// The SDK answers an unknown method with a plain-text 400 over HTTP and with
			// -32601 over stdio; both are legitimate.
			err := s.Call(&Request{Method: "no/such/method"}, deadline, &rep)
			var e *Error
			if !errors.As(err, &e) || !(e.Class == ClassJSONRPC && e.Code == codec.CodeMethodNotFound || e.Class == ClassHTTP && e.Code == 400) {
				t.Errorf("unknown method: err = %v, want jsonrpc -32601 or http 400", err)
			}
			err = s.Call(&Request{Method: "tools/call", Params: []byte(`{"name":"nope","arguments":{}}`)}, deadline, &rep)
			if !errors.As(err, &e) || e.Class != ClassJSONRPC {
				t.Errorf("unknown tool: err = %v, want a JSON-RPC error", err)
			}
		})
	}
}

func TestNotificationsOnStream(t *testing.T) {
	var c sdktest.Counters
	for _, tg := range targets(t, &c) {
		if !tg.stream {
			continue
		}
		t.Run(tg.name, func(t *testing.T) {
			var mu sync.Mutex
			got := make(chan string, 10)
			tg.opts.OnNotification = func(session int, m *codec.Message, at time.Time) {
				mu.Lock()
				defer mu.Unlock()
				if string(m.Method) == "notifications/resources/updated" {
					got <- string(m.URI)
				}
			}
			s := dialTest(t, tg.opts, 7)
			deadline := time.Now().Add(10 * time.Second)
			if !s.Info().StreamOpen {
				t.Fatal("no stream")
			}
			var rep Reply
			if err := s.Call(&Request{Method: "resources/subscribe", Params: []byte(`{"uri":"test://r/2"}`)}, deadline, &rep); err != nil {
				t.Fatal(err)
			}
			if err := s.Call(&Request{Method: "tools/call", Params: []byte(`{"name":"touch","arguments":{"uri":"test://r/2"}}`)}, deadline, &rep); err != nil {
				t.Fatal(err)
			}
			select {
			case uri := <-got:
				if uri != "test://r/2" {
					t.Errorf("updated %q", uri)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("no resources/updated notification")
			}
		})
	}
}

// TestServerRequests has the server ping the client in the middle of a tool call; the
// call only completes if the client answers, on whichever channel the transport uses.
func TestServerRequests(t *testing.T) {
	var c sdktest.Counters
	for _, tg := range targets(t, &c) {
		if tg.protocol == Version20260728 || strings.Contains(tg.name, "stateless") {
			continue // no server-to-client requests without a session
		}
		if tg.opts.Transport == "" && !tg.opts.Stream && strings.Contains(tg.name, "2025-03-26") {
			continue // JSON replies and no GET stream: the server has no way to send a request
		}
		t.Run(tg.name, func(t *testing.T) {
			s := dialTest(t, tg.opts, 0)
			deadline := time.Now().Add(10 * time.Second)
			var rep Reply
			if err := s.Call(&Request{Method: "tools/call", Params: []byte(`{"name":"pingclient","arguments":{}}`)}, deadline, &rep); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(rep.Result), "pong") {
				t.Errorf("result %s", rep.Result)
			}
		})
	}
}

func TestDialErrors(t *testing.T) {
	tests := []struct {
		name  string
		opts  Options
		class Class
	}{
		{"refused", Options{URL: "http://127.0.0.1:1/mcp"}, ClassTransport},
		{"stdio missing binary", Options{Transport: Stdio, Command: []string{"/nonexistent/mcp-server"}}, ClassTransport},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := NewDialer(tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			_, err = d.Dial(0, time.Now().Add(5*time.Second))
			var e *Error
			if !errors.As(err, &e) || e.Class != tt.class {
				t.Fatalf("err = %v, want class %v", err, tt.class)
			}
		})
	}
}

func TestOptionsValidation(t *testing.T) {
	tests := []struct {
		name string
		opts Options
	}{
		{"no url", Options{}},
		{"bad scheme", Options{URL: "ftp://x/mcp"}},
		{"unknown transport", Options{Transport: "ws", URL: "http://127.0.0.1/mcp"}},
		{"unknown protocol", Options{URL: "http://127.0.0.1/mcp", Protocol: "2023-01-01"}},
		{"stateless over sse", Options{Transport: SSE, URL: "http://127.0.0.1/sse", Protocol: Version20260728}},
		{"stdio without command", Options{Transport: Stdio}},
	}
	for _, tt := range tests {
		if _, err := NewDialer(tt.opts); err == nil {
			t.Errorf("%s: no error", tt.name)
		}
	}
}

func TestAppendWithMeta(t *testing.T) {
	meta := []byte(`"_meta":{}`)
	tests := []struct{ params, want string }{
		{"", `{"_meta":{}}`},
		{"{}", `{"_meta":{}}`},
		{" { } ", `{"_meta":{}}`},
		{`{"name":"echo"}`, `{"_meta":{},"name":"echo"}`},
	}
	for _, tt := range tests {
		var p []byte
		if tt.params != "" {
			p = []byte(tt.params)
		}
		if got := string(appendWithMeta(nil, p, meta)); got != tt.want {
			t.Errorf("appendWithMeta(%q) = %s, want %s", tt.params, got, tt.want)
		}
	}
}
