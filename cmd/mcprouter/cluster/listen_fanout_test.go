package cluster

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/cmd/mcpbackend/mcpbackendtest"
	backendsrv "github.com/mcprouter/mcprouter/cmd/mcpbackend/server"
	"github.com/mcprouter/mcprouter/cmd/mcprouter/app"
	"github.com/mcprouter/mcprouter/cmd/mcprouter/app/apptest"
	"github.com/mcprouter/mcprouter/internal/mcpraw"
	"github.com/mcprouter/mcprouter/internal/testio"
	"github.com/mcprouter/mcprouter/internal/testwait"
)

// subscribeCounter stands between the routers and the backend and counts the requests
// that open an upstream subscription (resources/subscribe on a 2025 session,
// subscriptions/listen toward a 2026-07-28 backend) naming one URI: what the backend
// itself saw, not what the routers say they hold.
type subscribeCounter struct {
	uri string
	mu  sync.Mutex
	n   map[string]int // method -> requests naming uri
}

func (c *subscribeCounter) count(method string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[method]
}

// tap puts c between a router and the backend at backendURL (testio.Tap) and returns
// the URL the router is to take as the backend's.
func (c *subscribeCounter) tap(t *testing.T, backendURL string) string {
	return testio.Tap(t, backendURL, func(r *http.Request, body []byte) {
		if r.Method != http.MethodPost || !bytes.Contains(body, []byte(c.uri)) {
			return
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, m := range []string{"resources/subscribe", "subscriptions/listen"} {
			c.n[m] += bytes.Count(body, []byte(`"method":"`+m+`"`))
		}
	})
}

// listenStream is a 2026-07-28 subscriptions/listen stream opened by raw HTTP.
type listenStream struct {
	data chan string
	stop context.CancelFunc
}

// openListen opens a listen stream on endpoint for uri, with the stream's id id, and
// returns once its acknowledgement arrived (which must honour uri).
func openListen(t *testing.T, endpoint, id, uri string) *listenStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	body := `{"jsonrpc":"2.0","id":"` + id + `","method":"subscriptions/listen","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}},"notifications":{"resourceSubscriptions":["` + uri + `"]}}}`
	resp := postModern(t, ctx, endpoint, body, "subscriptions/listen", "")
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("listen on %s: %d %s", endpoint, resp.StatusCode, b)
	}
	s := &listenStream{data: make(chan string, 64), stop: cancel}
	go func() {
		defer resp.Body.Close()
		defer close(s.data)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if line, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				s.data <- line
			}
		}
	}()
	ack := testwait.Recv(t, "the listen acknowledgement on "+endpoint, 10*time.Second, s.data)
	if !strings.Contains(ack, `"notifications/subscriptions/acknowledged"`) || !strings.Contains(ack, `"resourceSubscriptions":["`+uri+`"]`) {
		t.Fatalf("acknowledgement on %s: %s", endpoint, ack)
	}
	return s
}

// postModern sends a 2026-07-28 request (its revision and routing headers) within ctx.
func postModern(t *testing.T, ctx context.Context, endpoint, body, method, name string) *http.Response {
	t.Helper()
	resp, err := http.DefaultClient.Do(mcpraw.NewModernRequest(ctx, endpoint, body, method, name))
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// TestListenFanOutAcrossInstances (issue 12): subscriptions/listen streams of 2026-07-28
// clients on two instances joined by NATS, and a 2025 session's GET stream subscribed to
// the same resource, share one upstream subscription: the backend is asked once for
// (backend, URI), and one update reaches every one of them. Both a dual-era backend
// (reached through a 2025 session: resources/subscribe) and a 2026-only one (reached
// statelessly: subscriptions/listen upstream) are tried. Once the streams end and the
// session unsubscribes, the upstream subscription is released.
func TestListenFanOutAcrossInstances(t *testing.T) {
	nodes := startNATS(t, 3)
	for _, era := range []backendsrv.Eras{backendsrv.ErasBoth, backendsrv.ErasModern} {
		t.Run(era.String(), func(t *testing.T) {
			backend := mcpbackendtest.Start(t, backendsrv.Config{Name: "ref", Tick: -1, Eras: era, Logger: quiet(t)})
			const uri = "memo://board"
			counter := &subscribeCounter{uri: uri, n: map[string]int{}}
			upstream := counter.tap(t, backend.URL())
			routers := make([]*app.App, 2)
			for i := range routers {
				cfg := routerConfig(fmt.Sprintf("%s-r%d", era, i), nodes[i].url(), upstream)
				cfg.Stateless = "on"
				routers[i] = apptest.Start(t, cfg, quiet(t), 10*time.Second)
			}
			a, b := routers[0], routers[1]

			listenA := openListen(t, a.URL(), "LA", uri)
			listenB := openListen(t, b.URL(), "LB", uri)
			h := &rawClient{t: t}
			sid := h.initialize(b.URL())
			events, stop := h.stream(b.URL(), sid, "")
			defer stop()
			h.post(b.URL(), sid, `{"jsonrpc":"2.0","id":2,"method":"resources/subscribe","params":{"uri":"`+uri+`"}}`)

			if n := upstreamSubscriptions(routers...); n != 1 {
				t.Fatalf("upstream subscriptions in the cluster = %d, want 1", n)
			}
			// Which instance holds it is not asserted: on a cluster just started, the
			// first listener's lease write may find the bucket's stream electing its
			// leader and be retried, and the second listener's instance takes it first.
			// Either way one of the listen streams is reached across NATS.

			// One change, made by a stateless call on B, reaches all three.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			resp := postModern(t, ctx, b.URL(), `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"touch","arguments":{"uri":"`+uri+`"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`, "tools/call", "touch")
			touched, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || strings.Contains(string(touched), `"error"`) {
				t.Fatalf("touch: %d %s", resp.StatusCode, touched)
			}
			for _, l := range []struct {
				id string
				s  *listenStream
			}{{"LA", listenA}, {"LB", listenB}} {
				upd := testwait.Recv(t, "the update on listen stream "+l.id, 10*time.Second, l.s.data)
				if !strings.Contains(upd, `"method":"notifications/resources/updated"`) || !strings.Contains(upd, `"uri":"`+uri+`"`) ||
					!strings.Contains(upd, `"io.modelcontextprotocol/subscriptionId":"`+l.id+`"`) {
					t.Fatalf("listen stream %s: %s", l.id, upd)
				}
			}
			if ev := nextData(t, events); !strings.Contains(ev.Data, `"notifications/resources/updated"`) || !strings.Contains(ev.Data, uri) {
				t.Fatalf("the 2025 session's GET stream: %+v", ev)
			}

			subscribes, listens := counter.count("resources/subscribe"), counter.count("subscriptions/listen")
			t.Logf("the backend saw %d resources/subscribe and %d subscriptions/listen for %s", subscribes, listens, uri)
			if subscribes+listens != 1 {
				t.Fatalf("the backend saw %d resources/subscribe and %d subscriptions/listen naming %s, want one in all", subscribes, listens, uri)
			}

			// The last listener gone, the upstream subscription is released.
			listenA.stop()
			listenB.stop()
			h.post(b.URL(), sid, `{"jsonrpc":"2.0","id":3,"method":"resources/unsubscribe","params":{"uri":"`+uri+`"}}`)
			testwait.For(t, "the upstream subscription to be released", 10*time.Second, func() bool { return upstreamSubscriptions(routers...) == 0 })
		})
	}
}
