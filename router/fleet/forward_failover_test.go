package fleet

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/internal/testwait"
	"github.com/mcprouter/mcprouter/transport/upstream"
)

// apartConn is a replica of replicas whose answers come apart from Send, as a stdio
// child's: the call to lose is written and never answered (Send returns nil); the test
// then reports the replica down, as the child's death does.
type apartConn struct{ hungUpConn }

func (c *apartConn) AnswersApart() bool { return true }

// Send loses the call with no error: it is written, and its answer never comes.
func (c *apartConn) Send(ctx context.Context, msg []byte) error { return c.send(ctx, msg, nil) }

// TestFailoverOnLostReplica: a replica whose answers come apart from the send dies with
// a call in flight. A call that may run twice (a read-only or idempotent tool, nothing
// heard of it) goes once to the other replica, whose answer the client gets; any
// other is answered with the loss, and is not sent again.
func TestFailoverOnLostReplica(t *testing.T) {
	for _, tc := range []struct {
		tool     string
		progress bool
		moves    bool
	}{
		{tool: "echo", moves: true},
		{tool: "put", moves: true},
		{tool: "touch"},
		{tool: "echo", progress: true},
	} {
		name := tc.tool
		if tc.progress {
			name += "+progress"
		}
		t.Run(name, func(t *testing.T) {
			fc, r := newReplicas(t, tc.progress, true)
			meta := ""
			if tc.progress {
				meta = `,"_meta":{"progressToken":"p"}`
			}
			fc.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a__` + tc.tool + `"` + meta + `}}`)
			first := testwait.Recv(t, "the first attempt", time.Minute, r.calls)
			if tc.progress {
				if m := fc.read(); string(m.Method) != "notifications/progress" {
					t.Fatalf("client got %s, want the progress first", m.Method)
				}
			}
			// The replica that holds the call dies: its connection reports it.
			r.conns[first].sink.Event(upstream.EventDown, io.ErrUnexpectedEOF)
			if tc.moves {
				if second := testwait.Recv(t, "the second attempt", time.Minute, r.calls); second == first {
					t.Fatalf("both attempts went to replica %d", first)
				}
			}
			m := fc.read()
			if tc.moves {
				wantMoved(t, fc, m, "1")
			} else {
				r.wantNotMoved(t, fc, m, "1", "connection lost")
			}
			waitReleased(t, fc)
		})
	}
}
