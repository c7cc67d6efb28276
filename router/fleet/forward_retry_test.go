package fleet

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/internal/testwait"
	"github.com/mcprouter/mcprouter/router"
	"github.com/mcprouter/mcprouter/transport/upstream"
)

// retryTools is the scripted backend's tools/list: one tool per annotation case.
const retryTools = `{"tools":[` +
	`{"name":"echo","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true}},` +
	`{"name":"put","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":false,"idempotentHint":true}},` +
	`{"name":"touch","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":false,"destructiveHint":false,"idempotentHint":false}},` +
	`{"name":"plain","inputSchema":{"type":"object"}},` +
	`{"name":"odd","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":"true"}}]}`

// replicas is a backend "a" of two scripted replicas. The first tools/call either of
// them gets is lost the way a replica killed mid-request loses it: Send fails with
// upstream.ErrNoResponse (after a progress notification, when progress is set); every
// other call is answered at once. calls records which replica got each call.
type replicas struct {
	conns    [2]*scriptedConn
	lose     atomic.Bool
	progress bool
	calls    chan int
}

// hungUpConn is one replica of replicas: a scriptedConn for the router's own requests.
type hungUpConn struct {
	*scriptedConn
	n int
	r *replicas
}

func (c *hungUpConn) Send(ctx context.Context, msg []byte) error {
	return c.send(ctx, msg, fmt.Errorf("%w: a: %w", upstream.ErrNoResponse, io.EOF))
}

// send answers msg at once, or, for the call to lose, returns lost (see replicas).
func (c *hungUpConn) send(ctx context.Context, msg []byte, lost error) error {
	var m codec.Message
	if err := codec.Scan(msg, &m); err != nil || string(m.Method) != "tools/call" {
		return c.scriptedConn.Send(ctx, msg)
	}
	c.r.calls <- c.n
	if c.r.lose.CompareAndSwap(true, false) {
		if c.r.progress {
			c.sink.Message([]byte(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":` + string(m.ID) + `,"progress":1}}`))
		}
		return lost
	}
	c.sink.Message(codec.AppendResult(nil, m.ID, []byte(`{"content":[]}`)))
	return nil
}

// newReplicas starts a fleet on replicas and a client session on it, and waits until
// both replicas take requests. apart makes them answer apart from Send, as stdio
// children do (apartConn).
func newReplicas(t *testing.T, progress, apart bool) (*fleetClient, *replicas) {
	r := &replicas{progress: progress, calls: make(chan int, 4)}
	r.lose.Store(true)
	var dialers []Dialer
	for i := range r.conns {
		up := &scriptedConn{got: make(chan []byte, 16), done: make(chan struct{})}
		tools := retryTools
		up.tools.Store(&tools)
		r.conns[i] = up
		dialers = append(dialers, Dialer{Addr: "replica" + strconv.Itoa(i), Dial: func(ctx context.Context, sink upstream.Sink) (upstream.Conn, error) {
			up.sink = sink
			if apart {
				return &apartConn{hungUpConn{scriptedConn: up, n: i, r: r}}, nil
			}
			return &hungUpConn{scriptedConn: up, n: i, r: r}, nil
		}})
	}
	f := New(Config{HealthInterval: time.Hour, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Backends: []BackendConfig{{
		Name: "a", Prefix: "a", Timeout: time.Minute, Dialers: dialers,
	}}})
	f.Start(time.Minute)
	testwait.For(t, "both replicas usable", time.Minute, func() bool {
		return f.set.all()[0].instances[0].usable() && f.set.all()[0].instances[1].usable()
	})
	return attachClient(t, f, nil), r
}

// waitReleased waits until the request is released: nothing in flight and nothing
// outstanding on either replica. The answer reaches the client just before its entry
// is released, so these counts go down just after the client's read.
func waitReleased(t *testing.T, fc *fleetClient) {
	t.Helper()
	testwait.For(t, "the request released", time.Minute, func() bool {
		if fc.f.InFlight() != 0 {
			return false
		}
		for _, in := range fc.f.set.all()[0].instances {
			if in.outstanding.Load() != 0 {
				return false
			}
		}
		return true
	})
}

// wantMoved checks that the lost call moved: the client got the result of id (from the
// other replica), and one failover was counted.
func wantMoved(t *testing.T, fc *fleetClient, m codec.Message, id string) {
	t.Helper()
	if m.Kind != codec.KindResult || string(m.ID) != id {
		t.Fatalf("client got kind %v for id %s, want the result of %s", m.Kind, m.ID, id)
	}
	if n := fc.f.Stats.Failovers.Load(); n != 1 {
		t.Fatalf("Failovers = %d, want 1", n)
	}
}

// wantNotMoved checks that the lost call stayed lost: the client got an error for id,
// backend unavailable, whose message says each of says; the call went to no other
// replica, and no failover was counted.
func (r *replicas) wantNotMoved(t *testing.T, fc *fleetClient, m codec.Message, id string, says ...string) {
	t.Helper()
	if m.Kind != codec.KindError || string(m.ID) != id {
		t.Fatalf("client got kind %v for id %s, want an error for %s", m.Kind, m.ID, id)
	}
	err := rpcErrorOf(m.Error).(*router.Error)
	for _, s := range says {
		if err.Code != codec.CodeBackendUnavailable || !strings.Contains(err.Message, s) {
			t.Fatalf("error %d %q, want %d saying %q", err.Code, err.Message, codec.CodeBackendUnavailable, s)
		}
	}
	select {
	case n := <-r.calls:
		t.Fatalf("the call was sent again, to replica %d", n)
	default:
	}
	if n := fc.f.Stats.Failovers.Load(); n != 0 {
		t.Fatalf("Failovers = %d, want 0", n)
	}
}

// TestRetryOnAnotherReplica: a call lost before any byte of its answer goes once to the
// other replica when running it twice does no harm: a read-only or idempotent tool.
func TestRetryOnAnotherReplica(t *testing.T) {
	for _, tool := range []string{"echo", "put"} {
		t.Run(tool, func(t *testing.T) {
			fc, r := newReplicas(t, false, false)
			fc.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a__` + tool + `"}}`)
			first := testwait.Recv(t, "the first attempt", time.Minute, r.calls)
			second := testwait.Recv(t, "the second attempt", time.Minute, r.calls)
			if first == second {
				t.Fatalf("both attempts went to replica %d, want the other one second", first)
			}
			wantMoved(t, fc, fc.read(), "1")
			waitReleased(t, fc)
			for i, in := range fc.f.set.all()[0].instances {
				if !in.healthy.Load() {
					t.Fatalf("replica %d is unhealthy; a lost answer must not eject it", i)
				}
			}
		})
	}
}

// TestNoRetryWhenItMayHaveRun: a lost call is not sent again when a second run could
// do harm (a tool without readOnlyHint or idempotentHint, or a hint that is not a
// boolean) or when the backend had already sent something about it: the client is told
// it may have run.
func TestNoRetryWhenItMayHaveRun(t *testing.T) {
	for _, tc := range []struct {
		tool, why string
		progress  bool
	}{
		{"touch", `tool "a__touch" is not annotated readOnlyHint or idempotentHint`, false},
		{"plain", `tool "a__plain" is not annotated`, false},
		{"odd", `tool "a__odd" is not annotated`, false},
		{"echo", "the backend had already sent messages about it", true},
	} {
		t.Run(tc.tool, func(t *testing.T) {
			fc, r := newReplicas(t, tc.progress, false)
			meta := ""
			if tc.progress {
				meta = `,"_meta":{"progressToken":"p"}`
			}
			fc.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"a__` + tc.tool + `"` + meta + `}}`)
			testwait.Recv(t, "the call", time.Minute, r.calls)
			m := fc.read()
			if tc.progress {
				if string(m.Method) != "notifications/progress" {
					t.Fatalf("client got %s, want the progress first", m.Method)
				}
				m = fc.read()
			}
			r.wantNotMoved(t, fc, m, "2", "may have run", tc.why)
		})
	}
}

// TestToolRepeatable reads tools' annotations: only a true boolean hint counts.
func TestToolRepeatable(t *testing.T) {
	for raw, want := range map[string]bool{
		`{"name":"a","annotations":{"readOnlyHint":true}}`:                         true,
		`{"name":"a","annotations":{"readOnlyHint":false,"idempotentHint":true}}`:  true,
		`{"name":"a","annotations":{"readOnlyHint":false,"idempotentHint":false}}`: false,
		`{"name":"a","annotations":{"readOnlyHint":"true","idempotentHint":1}}`:    false,
		`{"name":"a","annotations":null}`:                                          false,
		`{"name":"a"}`:                                                             false,
	} {
		if got := toolRepeatable([]byte(raw)); got != want {
			t.Errorf("toolRepeatable(%s) = %v, want %v", raw, got, want)
		}
	}
}
