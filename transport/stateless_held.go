package transport

import (
	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/transport/auth"
)

// Held is a stateless exchange reduced to what a long stream needs once its request has
// been admitted and acknowledged (subscriptions/listen, held for hours): where to send,
// the handler's screen, and who the client is. The Exchange it came from (its scan of
// the request, the request's copied bytes and headers) goes back to its pool at once:
// a held stream otherwise kept them, about 1.2 KiB, for nothing.
//
// Send, Reply and Done are the Exchange's, with the same contract: Send must not be
// called after Reply or Done, and callers that may race with the end serialize them.
// What they pass through the handler's StatelessScreen is shown on an exchange lent for
// the call, which carries the session, principal, carrier and the request's kind and id
// (a copy), but nothing else of the request (the rest of Msg and Raw are zero, Headers
// empty).
type Held struct {
	call      *call
	screen    StatelessScreen
	session   *Session
	principal *auth.Principal
	carrier   Carrier
	id        []byte // the request's id, copied: the screen names the request by it
}

// Hold gives x back to the transport and returns the Held that stands for it: the
// handler uses x no more, nor anything it pointed into (x.Msg, x.Raw, x.Headers; copy
// what it needs first). What was registered with OnAbandon stays registered, as does
// HoldStream and the status set; Trace is left behind (a held request's trace ended when
// it was acknowledged). Hold must not race with another use of x.
func (x *Exchange) Hold() *Held {
	h := &Held{call: x.call, screen: x.screen, session: x.Session, principal: x.Principal, carrier: x.Carrier}
	if x.screen != nil {
		h.id = append([]byte(nil), x.Msg.ID...)
	}
	x.recycle()
	return h
}

// Send is Exchange.Send on the held request.
func (h *Held) Send(msg []byte) error {
	if h.screen == nil {
		return h.call.send(msg)
	}
	x := h.lend()
	err := x.Send(msg)
	x.recycle()
	return err
}

// Reply is Exchange.Reply on the held request: it ends it; h is not to be used after.
func (h *Held) Reply(msg []byte) { h.lend().Reply(msg) }

// Done is Exchange.Done on the held request: it ends it without a reply.
func (h *Held) Done() { h.lend().Done() }

// lend makes a pooled exchange stand for h for one call (released by Reply or Done,
// which unref the call as the held exchange's end, or by recycle after a Send).
func (h *Held) lend() *Exchange {
	x := newExchange()
	x.call, x.screen, x.Stateless = h.call, h.screen, true
	x.Session, x.Principal, x.Carrier = h.session, h.principal, h.carrier
	x.Msg.Kind, x.Msg.ID = codec.KindRequest, h.id
	return x
}

// recycle puts x back in the pool without ending its call: its call lives on elsewhere
// (Hold, Held.Send). The pooled copy buffer goes with it.
func (x *Exchange) recycle() {
	*x = Exchange{own: x.own[:0]}
	if cap(x.own) > maxPooledBuf {
		x.own = nil
	}
	exchangePool.Put(x)
}
