package transport

import (
	"errors"
	"testing"

	"github.com/mcprouter/mcprouter/transport/auth"
)

// relayRecorder is a RelayOutput that keeps what it is given.
type relayRecorder struct {
	related []string
	reply   string
	status  int
	replies int
}

func (r *relayRecorder) Related(msg []byte) error {
	r.related = append(r.related, string(msg))
	return nil
}

func (r *relayRecorder) Reply(msg []byte, status int) {
	r.reply, r.status = string(msg), status
	r.replies++
}

// handlerFunc is a Handler of HandleMessage alone.
type handlerFunc func(x *Exchange)

func (h handlerFunc) HandleMessage(x *Exchange) { h(x) }
func (handlerFunc) SessionClosed(*Session)      {}

// TestServeRelayed: a relayed request reaches the handler as a stateless request with
// the sender's principal and its own copy of the bytes; what the handler sends before
// the reply goes to Related in order, the reply and its status to Reply once; Abandon
// runs what the handler registered; anything but one request is refused unhandled.
func TestServeRelayed(t *testing.T) {
	msg := []byte(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"t"}}`)
	who := &auth.Principal{Subject: "alice"}
	var got *Exchange
	abandoned := false
	h := handlerFunc(func(x *Exchange) {
		got = x
		if !x.Stateless || x.Principal != who || x.Session != nil || string(x.Msg.Method) != "tools/call" || string(x.Msg.ID) != "3" {
			t.Errorf("exchange: stateless %v, principal %v, method %q, id %q", x.Stateless, x.Principal, x.Msg.Method, x.Msg.ID)
		}
		x.OnAbandon(func() { abandoned = true })
	})
	out := &relayRecorder{}
	r, err := ServeRelayed(h, msg, who, out)
	if err != nil || got == nil {
		t.Fatalf("ServeRelayed: %v (handled: %v)", err, got != nil)
	}
	copy(msg, "xxxxxxxx") // the exchange has its own copy
	if string(got.Msg.Method) != "tools/call" {
		t.Fatalf("the exchange's bytes follow the caller's buffer")
	}
	got.Send([]byte(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}`))
	got.Send([]byte(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":2}}`))
	r.Abandon()
	if !abandoned {
		t.Fatal("Abandon did not run what the handler registered")
	}
	got.SetStatus(400)
	got.Reply([]byte(`{"jsonrpc":"2.0","id":3,"error":{"code":-32602,"message":"no"}}`))
	if len(out.related) != 2 || out.replies != 1 || out.status != 400 || out.reply != `{"jsonrpc":"2.0","id":3,"error":{"code":-32602,"message":"no"}}` {
		t.Fatalf("output: related %q, reply %q (%d) x%d", out.related, out.reply, out.status, out.replies)
	}

	for _, bad := range []string{
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{}}`,
		`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`,
		`{"jsonrpc":"2.0","id":1,"result":{}}`,
		`not json`,
	} {
		if _, err := ServeRelayed(handlerFunc(func(*Exchange) { t.Errorf("%s was handed over", bad) }), []byte(bad), nil, &relayRecorder{}); !errors.Is(err, ErrRelayNotRequest) {
			t.Errorf("%s: %v, want ErrRelayNotRequest", bad, err)
		}
	}
}
