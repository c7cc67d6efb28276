package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/cmd/mcprouter/app"
	"github.com/mcprouter/mcprouter/cmd/mcprouter/app/apptest"
	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/internal/mcpraw"
	"github.com/mcprouter/mcprouter/internal/testwait"
	"github.com/mcprouter/mcprouter/router/policy"
)

// TestPolicyLimitAcrossInstances: a rate limit is cluster-wide. Three instances on a
// NATS cluster share one limit of burst 10 (and a negligible rate): six calls on the
// first, once the others have applied its consumption, leave four for the second,
// and none for the third.
func TestPolicyLimitAcrossInstances(t *testing.T) {
	nodes, be := startCluster(t)
	var routers []*app.App
	for i, n := range nodes {
		cfg := routerConfig(fmt.Sprintf("policy-%d", i), n.url(), be.URL())
		cfg.Policy = policy.Config{
			Limits:       []policy.Limit{{Name: "everyone", Rate: 1, Per: time.Hour, Burst: 10}},
			SyncInterval: 20 * time.Millisecond,
		}
		routers = append(routers, apptest.Start(t, cfg, quiet(t), 10*time.Second))
	}
	for i, r := range routers {
		if r.Sync == nil {
			t.Fatalf("instance %d shares no limits", i)
		}
	}
	// A subscription's interest reaches the other NATS nodes over the routes a moment
	// after its own node has it: consumption published meanwhile is lost to them
	// (README, policy: an instance that has just started). Wait until every node routes the limits'
	// subject to all three instances.
	subject := routers[0].Bus.Subject("policy", "limits")
	testwait.For(t, "every node knowing the three instances' interest in the limits", 10*time.Second, func() bool {
		for _, n := range nodes {
			if k, err := n.routeInterest(subject); err != nil || k < len(nodes)-1 {
				return false
			}
		}
		return true
	})
	h := &rawClient{t: t}
	call := func(r *app.App, id int) (limited bool) {
		t.Helper()
		endpoint := "http://" + r.Addr() + "/mcp"
		sid := h.initialize(endpoint)
		// A limited request alone in its POST is refused whole: 429 with Retry-After,
		// the JSON-RPC error in the body.
		c := &mcpraw.Client{URL: endpoint, Session: sid}
		reply, err := c.Post(context.Background(), fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}`, id))
		if err != nil || (reply.Status != http.StatusOK && reply.Status != http.StatusTooManyRequests) {
			t.Fatalf("tools/call: %v %v", err, reply)
		}
		if reply.Status == http.StatusTooManyRequests && reply.Header.Get("Retry-After") == "" {
			t.Fatalf("429 without Retry-After: %v", reply)
		}
		body := string(reply.Body)
		var rep struct {
			Error *struct {
				Code int `json:"code"`
				Data struct {
					RetryAfterMs int `json:"retryAfterMs"`
				} `json:"data"`
			} `json:"error"`
		}
		data := body
		if i := indexData(body); i >= 0 {
			data = body[i:]
			if j := strings.IndexByte(data, '\n'); j >= 0 {
				data = data[:j]
			}
		}
		if err := json.Unmarshal([]byte(data), &rep); err != nil {
			t.Fatalf("reply %q: %v", body, err)
		}
		if rep.Error == nil {
			return false
		}
		if rep.Error.Code != codec.CodeRateLimited || rep.Error.Data.RetryAfterMs <= 0 {
			t.Fatalf("reply %s, want a result or -32018 with retryAfterMs", body)
		}
		return true
	}
	// An instance's consumption may go out in several messages (one per interval):
	// each instance is flushed after its calls, and the others waited for until they
	// applied every message it published.
	s0, s1, s2 := routers[0].Sync, routers[1].Sync, routers[2].Sync
	pub0, pub1 := s0.Published.Load(), s1.Published.Load()
	applied1, applied2 := s1.Applied.Load(), s2.Applied.Load()
	flush := func(s *policy.Sync) uint64 {
		t.Helper()
		if err := s.Flush(); err != nil {
			t.Fatal(err)
		}
		return s.Published.Load()
	}
	for i := range 6 {
		if call(routers[0], i) {
			t.Fatalf("call %d on the first instance limited, want 6 of the burst of 10 admitted", i)
		}
	}
	from0 := flush(s0) - pub0
	testwait.For(t, "the other instances applying the first one's consumption", 10*time.Second, func() bool {
		return s1.Applied.Load() >= applied1+from0 && s2.Applied.Load() >= applied2+from0
	})
	for i := range 4 {
		if call(routers[1], 10+i) {
			t.Fatalf("call %d on the second instance limited, want the 4 left admitted", i)
		}
	}
	if !call(routers[1], 20) {
		t.Fatal("an 11th call admitted on the second instance, want it limited")
	}
	from1 := flush(s1) - pub1
	testwait.For(t, "the third instance applying the second one's consumption", 10*time.Second, func() bool {
		return s2.Applied.Load() >= applied2+from0+from1
	})
	if !call(routers[2], 30) {
		t.Fatal("a call admitted on the third instance after the cluster used its burst, want it limited")
	}
}

// indexData finds the JSON of an SSE reply's data line, -1 for a JSON reply.
func indexData(body string) int {
	if i := strings.Index(body, "data: {"); i >= 0 {
		return i + len("data: ")
	}
	return -1
}
