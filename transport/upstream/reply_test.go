package upstream

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/codec"
)

func TestPeekResponseID(t *testing.T) {
	for _, tc := range []struct {
		in, want string
	}{
		{`{"jsonrpc":"2.0","id":7,"result":{}}`, `7`},
		{`{"jsonrpc":"2.0","id":"a\"b","error":{"code":1,"message":"x"}}`, `"a\"b"`},
		{`{"jsonrpc":"2.0","result":{"a":[1,2]},"id":8}`, `8`},
		{`{"jsonrpc":"2.0","id":7,"result":{"content":[{"text":"cut`, `7`},
		{`{"jsonrpc":"2.0","id":7,"res`, ``},        // no result or error seen
		{`{"jsonrpc":"2.0","id":12`, ``},            // the id itself may be cut off
		{`{"jsonrpc":"2.0","result":{"x":"cut`, ``}, // the id never came
		{`{"jsonrpc":"2.0","id":7,"method":"ping"}`, ``},
		{`{"jsonrpc":"2.0","method":"sampling/createMessage","id":7,"result":1}`, ``},
		{`[{"jsonrpc":"2.0","id":7,"result":{}}]`, ``},
		{`<html>`, ``},
		{``, ``},
	} {
		if got := string(peekResponseID([]byte(tc.in))); got != tc.want {
			t.Errorf("peekResponseID(%s) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// FuzzPeekResponseID: any input is safe, and a whole response's id is found wherever
// it stands, a request's never.
func FuzzPeekResponseID(f *testing.F) {
	for _, s := range []string{`{"jsonrpc":"2.0","id":7,"result":{}}`, `{"jsonrpc":"2.0","result":[],"id":"x"}`,
		`{"jsonrpc":"2.0","id":1,"method":"ping"}`, `{"id":3,"error":{"code":-1,"message":"m"}}`} {
		f.Add([]byte(s), uint16(len(s)))
	}
	f.Fuzz(func(t *testing.T, b []byte, cut uint16) {
		var m codec.Message
		if codec.Scan(b, &m) == nil {
			got := peekResponseID(b)
			switch m.Kind {
			case codec.KindResult, codec.KindError:
				if string(got) != string(m.ID) {
					t.Fatalf("%s: peek %q, scan %q", b, got, m.ID)
				}
			case codec.KindRequest, codec.KindNotification:
				if got != nil {
					t.Fatalf("%s: peek %q of a %v", b, got, m.Kind)
				}
			}
		}
		peekResponseID(b[:int(cut)%(len(b)+1)])
	})
}

// hostileReply is a backend whose every POST gets reply, and counts its GETs (a
// resumption).
func hostileReply(t *testing.T, contentType, reply string) (string, *atomic.Int32) {
	var gets atomic.Int32
	srv := scripted(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			gets.Add(1)
			http.Error(w, "no", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", contentType)
		io.WriteString(w, reply)
	})
	return srv.URL, &gets
}

// TestHTTPHostileReplies: a reply that cannot answer the request fails its Send at
// once, saying why, and a broken SSE reply is not resumed (the backend would replay it).
func TestHTTPHostileReplies(t *testing.T) {
	const call = `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"x"}}`
	big := `{"jsonrpc":"2.0","id":5,"result":{"pad":"` + strings.Repeat("x", 4096) + `"}}`
	for _, tc := range []struct {
		name, ctype, reply string
		want               error
		says               string
		delivered          int // messages the Sink got
	}{
		{"cut off", "application/json", `{"jsonrpc":"2.0","id":5,"result":{"content":[`, ErrProtocol, "not valid JSON", 0},
		{"garbage", "application/json", `<html>oops</html>`, ErrProtocol, "not valid JSON", 0},
		{"empty", "application/json", ``, ErrProtocol, "empty body", 0},
		{"another id", "application/json", `{"jsonrpc":"2.0","id":99,"result":{}}`, ErrProtocol, `"id":99`, 1},
		{"too large", "application/json", big, ErrTooLarge, "limit of 1024 bytes", 0},
		{"too large, whole in the read buffer", "application/json", big[:1500] + `"}}`, ErrTooLarge, "limit of 1024 bytes", 0},
		{"double in a batch", "application/json", `[{"jsonrpc":"2.0","id":5,"result":{}},{"jsonrpc":"2.0","id":5,"result":{}}]`, nil, "", 2},
		{"sse too large", "text/event-stream", "id: e1\ndata: " + big + "\n\n", ErrTooLarge, "limit of 1024 bytes", 0},
		{"sse cut off", "text/event-stream", "id: e1\ndata: {\"jsonrpc\":\"2.0\",\"id\":5,\"result\":{\"x\":\n\n", ErrProtocol, "not valid JSON", 0},
		{"sse double", "text/event-stream", "id: e1\ndata: {\"jsonrpc\":\"2.0\",\"id\":5,\"result\":{}}\n\nid: e2\ndata: {\"jsonrpc\":\"2.0\",\"id\":5,\"result\":{}}\n\n", nil, "", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url, gets := hostileReply(t, tc.ctype, tc.reply)
			c, s := dialHTTP(t, url, HTTPOptions{MaxMessage: 1024, Linger: time.Second})
			defer c.Close()
			err := c.Send(testCtx(t), []byte(call))
			if !errors.Is(err, tc.want) || tc.want != nil && !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("Send: %v; want %v saying %q", err, tc.want, tc.says)
			}
			if n := s.count(func(*codec.Message) bool { return true }); n != tc.delivered {
				t.Errorf("%d messages delivered, want %d", n, tc.delivered)
			}
			if n := gets.Load(); n != 0 {
				t.Errorf("%d GETs: a broken reply was resumed", n)
			}
		})
	}
}

// TestHTTPTrickledBodyEndsAtDeadline: a JSON body or SSE stream written a byte at a
// time, never ending, does not hold Send past its deadline, and says it was late.
func TestHTTPTrickledBodyEndsAtDeadline(t *testing.T) {
	for _, ctype := range []string{"application/json", "text/event-stream"} {
		t.Run(ctype, func(t *testing.T) {
			srv := trickling(t, ctype)
			c, _ := dialHTTP(t, srv.URL, HTTPOptions{})
			defer c.Close()
			ctx, cancel := context.WithTimeout(testCtx(t), 300*time.Millisecond)
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- c.Send(ctx, []byte(msgList)) }()
			select {
			case err := <-done:
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("Send: %v, want a deadline error", err)
				}
			case <-time.After(waitLimit):
				t.Fatalf("Send still reading a trickled body %v after its deadline", waitLimit)
			}
		})
	}
}

// trickling starts a backend that answers with a body of type ctype written a byte every
// 20 ms, never ending, until the test ends.
func trickling(t *testing.T, ctype string) *httptest.Server {
	stop := make(chan struct{})
	srv := scripted(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", ctype)
		w.WriteHeader(http.StatusOK)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			io.WriteString(w, "d")
			w.(http.Flusher).Flush()
			select {
			case <-tick.C:
			case <-stop:
				return
			case <-r.Context().Done():
				return
			}
		}
	})
	t.Cleanup(func() { close(stop) }) // before the server's Close, which waits for handlers
	return srv
}

// TestStdioHostileLines: a line cut off or over the limit that still says which request
// it answers fails that request at once, with an error in its place; the child's next
// lines still come through.
func TestStdioHostileLines(t *testing.T) {
	p, sinks := startPool(t, childCommand("echo"), 1, fastRestart(StdioOptions{MaxMessage: 4096}))
	c, s := p.Conn(0), sinks[0]
	ctx := testCtx(t)
	for _, tc := range []struct {
		id, tool, says string
	}{
		{"11", "cutoff", "not valid JSON"},
		{"12", "huge", "limit of 4096 bytes"},
	} {
		if err := c.Send(ctx, []byte(msgCall(mustAtoi(tc.id), tc.tool, ""))); err != nil {
			t.Fatal(err)
		}
		reply := s.waitResponse(t, tc.id)
		var m codec.Message
		if err := codec.Scan(reply, &m); err != nil || m.Kind != codec.KindError {
			t.Fatalf("%s: %s, want an error", tc.tool, reply)
		}
		mustContain(t, m.Error, tc.says)
		mustContain(t, m.Error, `"code":-32010`)
	}
	if err := c.Send(ctx, []byte(msgCall(13, "echo", "after"))); err != nil {
		t.Fatal(err)
	}
	s.waitResponse(t, "13")
	if c.Restarts() != 0 {
		t.Errorf("the child was restarted %d times", c.Restarts())
	}
}

func mustAtoi(s string) int {
	n := 0
	for _, c := range s {
		n = n*10 + int(c-'0')
	}
	return n
}
