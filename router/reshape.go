package router

import (
	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/router/modern"
	"github.com/mcprouter/mcprouter/transport"
)

// ErrorReshaper is a Fleet that turns a backend's error a 2026-07-28 client may not be
// sent into what the revision says in its place (modern.ErrorToModern's reshape: a 2025
// backend's -32042, URL elicitation required, becomes an input_required result).
type ErrorReshaper interface {
	// ReshapeError returns the response that replaces the error response whose error
	// object is errObj to the stateless request x; nil when it has none to offer.
	ReshapeError(x *transport.Exchange, errObj []byte) []byte
}

// reshapeError returns what replaces an error response (error object errObj) to the
// stateless request x when the revision forbids its code: the fleet's reshaped answer,
// or an internal error saying why when the fleet has none. nil when the error stands.
func (r *Router) reshapeError(x *transport.Exchange, errObj []byte) []byte {
	code := modern.ErrorCode(errObj)
	if _, reshape := modern.ErrorToModern(code); !reshape {
		return nil
	}
	if re, ok := r.fleet.(ErrorReshaper); ok {
		if out := re.ReshapeError(x, errObj); out != nil {
			return out
		}
	}
	return codec.AppendError(nil, x.Msg.ID, codec.CodeInternalError, "mcprouter: a backend answered with error code "+
		string(codec.Member(errObj, "code"))+", which 2026-07-28 forbids, and the router has no 2026-07-28 form of it", nil)
}
