package transport

import (
	"errors"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/transport/auth"
)

// Relayed requests: a stateless request that one router instance received and another
// one serves. A 2026-07-28 client's retry carries a requestState that names the instance
// holding the backend request it answers (the owner); the instance the retry landed on
// sends it over the cluster's bus, and the owner hands it to its handler here, as a
// stateless request of its own, carried by NATS: without HTTP headers (the receiving
// instance checked them), without a screen (the receiving instance's exchange screens
// what goes back to its client), and with what the handler sends going to a
// RelayOutput, which carries it back.

// RelayOutput receives what the handler sends on a relayed request: Related for each
// message that precedes the reply (progress, logging), in order, then Reply once, with
// the HTTP status the handler set (Exchange.SetStatus; 0 when none). Both are called
// with the request's lock held: they must not block, and must copy msg.
type RelayOutput interface {
	Related(msg []byte) error
	Reply(msg []byte, status int)
}

// Relay is one relayed request being served.
type Relay struct {
	call call
	out  RelayOutput
	in   inbound
	tmp  []byte
}

// ErrRelayNotRequest refuses a relayed message that is not one valid JSON-RPC request.
var ErrRelayNotRequest = errors.New("transport: a relayed message must be one JSON-RPC request")

// errRelayNoSession refuses Bind: a relayed request is stateless.
var errRelayNoSession = errors.New("transport: a relayed request has no session")

// ServeRelayed hands msg, one JSON-RPC request (copied), sent by principal (nil:
// anonymous), to h as a stateless request; what h sends on it goes to out. It returns
// without waiting for the reply.
func ServeRelayed(h Handler, msg []byte, principal *auth.Principal, out RelayOutput) (*Relay, error) {
	r := &Relay{out: out}
	if batch, err := r.in.split(msg, 1); batch || err != nil {
		return nil, ErrRelayNotRequest
	}
	if _, invalid := r.in.scan(); invalid > 0 || r.in.msgs[0].Kind != codec.KindRequest {
		return nil, ErrRelayNotRequest
	}
	r.call.init(r, false)
	r.in.handOff(&r.call, h, arrival{carrier: CarrierNATS, principal: principal, stateless: &StatelessHeaders{}}, &r.tmp)
	r.in.reset()
	r.call.unref()
	return r, nil
}

// Abandon tells the handler that the requester went away before the reply (the
// client closed its stream on the instance that relayed the request): what the handler
// registered with Exchange.OnAbandon runs.
func (r *Relay) Abandon() { r.call.abandoned() }

func (r *Relay) finish(c *call) { r.out.Reply(c.appendBody(nil), c.status) }

func (r *Relay) related(_ *call, msg []byte) (bool, error) { return false, r.out.Related(msg) }

func (r *Relay) streamed(*call, []byte, bool) {}

func (r *Relay) bind(*call, string, SessionState) (*Session, error) { return nil, errRelayNoSession }

func (r *Relay) released(*call) {}
