package upstream

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"

	"github.com/mcprouter/mcprouter/codec"
)

// hangUp is a backend that reads each HTTP request whole and then closes the
// connection without a byte of answer, as a replica killed mid-request does. It
// records the JSON-RPC method of every request it read.
type hangUp struct {
	addr    string
	mu      sync.Mutex
	methods []string
}

func newHangUp(t *testing.T) *hangUp {
	h := &hangUp{}
	h.addr = rawBackend(t, h.serve)
	return h
}

func (h *hangUp) url() string { return "http://" + h.addr + "/mcp" }

// serve reads one request from nc, records its method and hangs up.
func (h *hangUp) serve(nc net.Conn) {
	defer nc.Close()
	req, err := http.ReadRequest(bufio.NewReader(nc))
	if err != nil {
		return
	}
	body, _ := io.ReadAll(req.Body)
	var m codec.Message
	method := "(unreadable)"
	if codec.Scan(body, &m) == nil {
		method = string(m.Method)
	}
	h.mu.Lock()
	h.methods = append(h.methods, method)
	h.mu.Unlock()
}

// got returns the methods of the requests read so far.
func (h *hangUp) got() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.methods...)
}

// TestHTTPNoResponse: a connection that closes after the request was written and before
// any byte of the answer is ErrNoResponse (the backend may have run it), not
// ErrBackendDown; a message RetrySafe allows was sent once more first, a tool call
// exactly once. Both the pool and the pipeline classify it the same way.
func TestHTTPNoResponse(t *testing.T) {
	for _, pipeline := range []int{0, 1} {
		for _, tc := range []struct {
			msg  string
			want int // requests the backend read
		}{
			{msgCall(5, "echo", "hi"), 1},
			{msgList, 2},
		} {
			var m codec.Message
			if err := codec.Scan([]byte(tc.msg), &m); err != nil {
				t.Fatal(err)
			}
			t.Run(fmt.Sprintf("%s/pipeline=%d", m.Method, pipeline), func(t *testing.T) {
				h := newHangUp(t)
				c, _ := dialHTTP(t, h.url(), HTTPOptions{Name: "web", Pipeline: pipeline})
				defer c.Close()
				err := c.Send(testCtx(t), []byte(tc.msg))
				if !errors.Is(err, ErrNoResponse) {
					t.Fatalf("Send: %v, want ErrNoResponse", err)
				}
				if errors.Is(err, ErrBackendDown) {
					t.Fatalf("Send: %v also matches ErrBackendDown: the backend may have run it", err)
				}
				if got := h.got(); len(got) != tc.want {
					t.Fatalf("backend read %v, want %d of %s", got, tc.want, m.Method)
				}
			})
		}
	}
}
