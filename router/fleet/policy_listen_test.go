package fleet

import (
	"strings"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/router"
	"github.com/mcprouter/mcprouter/router/policy"
	"github.com/mcprouter/mcprouter/transport"
)

// listenHandler is fleetHandler that serves subscriptions/listen with the fleet's
// Listen, as the router's stateless path does.
type listenHandler struct{ fleetHandler }

func (h listenHandler) HandleMessage(x *transport.Exchange) {
	if string(x.Msg.Method) == "subscriptions/listen" {
		h.f.Listen(h.sess, x)
		return
	}
	h.fleetHandler.HandleMessage(x)
}

// TestListenPolicy: the rules decide each resource URI of a subscriptions/listen as
// the resources/subscribe of that URI (mcp.method, mcp.uri, mcp.backend). An allowed
// entry is subscribed upstream and acknowledged; a denied one is left out of the
// acknowledgement, which honours the rest of the filter; a filter whose every entry is
// denied, with nothing else to honour, is refused with -32017 naming the URI.
func TestListenPolicy(t *testing.T) {
	for _, tc := range []struct {
		name    string
		rule    policy.Rule
		request string // params.notifications
		want    string // the acknowledgement's notifications, or "" for a refusal
		upward  bool   // the backend gets the resources/subscribe
	}{
		{"allowed", policy.Rule{Allow: `mcp.method == "resources/subscribe" && mcp.uri == "file:///r" && mcp.backend == "a"`},
			`{"toolsListChanged":true,"resourceSubscriptions":["file:///r"]}`,
			`{"toolsListChanged":true,"resourceSubscriptions":["file:///r"]}`, true},
		{"denied entry left out", policy.Rule{Name: "no-r", Deny: `mcp.uri == "file:///r"`},
			`{"toolsListChanged":true,"resourceSubscriptions":["file:///r"]}`,
			`{"toolsListChanged":true}`, false},
		{"everything denied", policy.Rule{Name: "no-r", Deny: `mcp.uri == "file:///r"`},
			`{"resourceSubscriptions":["file:///r"]}`, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, up := newScriptedFleet(t, time.Minute, false)
			e, err := policy.New(policy.Config{Rules: []policy.Rule{tc.rule}}, policy.Options{Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			f.SetPolicy(e)
			sess := new(router.Session)
			fc := attachHandler(t, f, up, sess, listenHandler{fleetHandler{f: f, sess: sess}})
			t.Cleanup(func() { go answerAll(up) }) // the unsubscribe when the session ends
			fc.send(`{"jsonrpc":"2.0","id":"L","method":"subscriptions/listen","params":{"notifications":` + tc.request + `}}`)
			if tc.upward {
				m := fc.upstream()
				if string(m.Method) != "resources/subscribe" || string(m.URI) != "file:///r" {
					t.Fatalf("backend got %s %s, want resources/subscribe file:///r", m.Method, m.URI)
				}
				fc.answer(m.ID, `{}`)
			}
			r := fc.read()
			if tc.want == "" {
				if r.Kind != codec.KindError || !strings.Contains(string(r.Error), `"code":-32017`) ||
					!strings.Contains(string(r.Error), `policy denies resources/subscribe of \"file:///r\" (rule \"no-r\")`) {
					t.Fatalf("listen answered %s %s, want -32017 naming the URI and the rule", r.Error, r.Params)
				}
				if n := e.Stats().DeniedByRule["no-r"]; n != 1 {
					t.Errorf("denials counted %d, want 1", n)
				}
				return
			}
			if string(r.Method) != "notifications/subscriptions/acknowledged" {
				t.Fatalf("listen answered %+v first, want the acknowledgement", r)
			}
			if want := `{"_meta":{"io.modelcontextprotocol/subscriptionId":"L"},"notifications":` + tc.want + `}`; string(r.Params) != want {
				t.Fatalf("acknowledged %s\nwant %s", r.Params, want)
			}
			select {
			case m := <-up.got:
				t.Fatalf("backend got %s for a denied entry", m)
			default:
			}
		})
	}
}

// answerAll answers every message the backend gets with an empty result, until the
// connection is closed (the fleet's Close).
func answerAll(up *scriptedConn) {
	for {
		select {
		case msg := <-up.got:
			var m codec.Message
			if codec.Scan(msg, &m) == nil && m.Kind == codec.KindRequest {
				up.sink.Message(codec.AppendResult(nil, m.ID, []byte(`{}`)))
			}
		case <-up.done:
			return
		}
	}
}
