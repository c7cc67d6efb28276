package fleet

import (
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/router"
	"github.com/mcprouter/mcprouter/router/modern"
	"github.com/mcprouter/mcprouter/transport"
)

// URL elicitation across eras. A 2025-11-25 backend that cannot go on until the user
// completes an out-of-band flow answers the request with -32042 (URL elicitation
// required), whose data.elicitations list the URLs; its client opens them and sends the
// request again. 2026-07-28 forbids that error: the same ask is an input_required
// result whose inputRequests hold elicitation/create requests with mode "url", and the
// client retries with inputResponses saying whether the user accepted. So for a
// 2026-07-28 client the router reshapes the error (ReshapeError): one inputRequest per
// elicitation and a requestState sealed as mrtr.go seals them (bound to the principal
// and the request's digest, with a TTL), whose payload marks it a URL state. Nothing
// stays in flight upstream: the backend's request ended with its error. The retry
// (resume) is checked like any other; when every elicitation was accepted, the request
// loses inputResponses and requestState and is routed again as the original request,
// which is what a 2025 client does once the user is through. A declined or cancelled
// elicitation ends the request with an error that says so.
//
// A URL state names no call, so any instance that can verify it (the one that sealed
// it, or any with the cluster's shared key) serves its retry; and it can be replayed
// within its TTL, which sends the original request again: nothing the client could not
// do without it.

// urlStateTTL is how long a URL state is good for: the user's flow in a browser (a
// sign-in, a payment) takes minutes, and the state holds nothing meanwhile.
const urlStateTTL = 15 * time.Minute

// urlPayloadSize is a URL state's sealed payload: instance | 'u' | count of
// elicitations. Its size tells it from a parked call's (payloadSize).
const urlPayloadSize = 8 + 1 + 1

// urlKey is the inputRequests key of elicitation i of a URL state.
func urlKey(i int) string { return "url-" + strconv.Itoa(i+1) }

// ReshapeError implements router.ErrorReshaper: a 2025 backend's -32042 to the
// stateless (2026-07-28) request x becomes an input_required result (see above), or an
// error the revision allows when it cannot: the client did not declare URL-mode
// elicitation, or the error's data lists no URL elicitation.
func (f *Fleet) ReshapeError(x *transport.Exchange, errObj []byte) []byte {
	if modern.ErrorCode(errObj) != codec.CodeURLElicitationRequired {
		return nil
	}
	return f.srv.park.urlElicitation(x, errObj)
}

// urlElicitation is ReshapeError for -32042 error object errObj.
func (p *parking) urlElicitation(x *transport.Exchange, errObj []byte) []byte {
	reqs := urlInputRequests(codec.Member(codec.Member(errObj, "data"), "elicitations"))
	if len(reqs) == 0 || len(reqs) > maxAsks {
		return codec.AppendError(nil, x.Msg.ID, codec.CodeInternalError, "mcprouter: the backend answered URL elicitation required (-32042) "+
			"with "+strconv.Itoa(len(reqs))+" URL elicitations in its data (1 to "+strconv.Itoa(maxAsks)+" can be put to a 2026-07-28 client "+
			"as input_required, which replaces that error)", nil)
	}
	var meta modern.Meta
	modern.ReadMetaOf(&x.Msg, &meta)
	if !hasMember(codec.Member(meta.Capabilities, "elicitation"), "url") {
		return codec.AppendError(nil, x.Msg.ID, codec.CodeMissingCapability, "Missing required client capability: the backend needs the user "+
			"to open a URL (URL-mode elicitation), and the request's clientCapabilities do not declare elicitation.url",
			requiredCapabilities("elicitation.url"))
	}
	var payload [urlPayloadSize]byte
	copy(payload[:8], p.instance[:])
	payload[8], payload[9] = 'u', byte(len(reqs))
	state := statePrefix + hex.EncodeToString(p.instance[:]) + ":" +
		p.sealer.Seal(payload[:], principalKey(x.Principal), modern.RequestDigest(&x.Msg), urlStateTTL)
	return codec.AppendResult(nil, x.Msg.ID, modern.AppendInputRequired(nil, reqs, state))
}

// urlInputRequests turns the elicitations of a -32042 error's data (a raw array) into
// elicitation/create input requests in 2026-07-28's URL mode (mode, message, url; the
// 2025 elicitationId names the notifications/elicitation/complete the revision
// dropped). Entries without a string url are skipped; mode, when given, must be url.
func urlInputRequests(els []byte) []modern.InputRequest {
	var reqs []modern.InputRequest
	var w codec.Walker
	if !w.Array(els) {
		return nil
	}
	for v, ok := w.Value(); ok && len(reqs) <= maxAsks; v, ok = w.Value() {
		url, msg := codec.Member(v, "url"), codec.Member(v, "message")
		if mode := codec.Member(v, "mode"); len(url) < 2 || url[0] != '"' || (mode != nil && string(mode) != `"url"`) {
			continue
		}
		if len(msg) < 2 || msg[0] != '"' {
			msg = []byte(`"The server needs you to open a URL to continue."`)
		}
		params := append([]byte(`{"mode":"url","message":`), msg...)
		params = append(append(append(params, `,"url":`...), url...), '}')
		reqs = append(reqs, modern.InputRequest{Key: urlKey(len(reqs)), Method: "elicitation/create", Params: params})
	}
	return reqs
}

// urlRetry takes the retry x of a URL state that opened with n elicitations: when the
// user accepted every one, x becomes the original request (without inputResponses and
// requestState) and again is true, for routing to route it; otherwise x is answered
// here.
func (p *parking) urlRetry(x *transport.Exchange, n int, rep *reporter) (again bool) {
	for i := range n {
		key := urlKey(i)
		ans := modern.InputResponse(x.Msg.Params, key)
		if ans == nil {
			x.SetStatus(http.StatusBadRequest)
			rep.replyErr(x, codec.CodeInvalidParams, "Invalid params: inputResponses has no answer for "+strconv.Quote(key)+" (elicitation/create, URL mode)")
			return false
		}
		if action := codec.Member(ans, "action"); string(action) != `"accept"` {
			rep.replyErr(x, codec.CodeInvalidRequest, "mcprouter: the user did not accept the URL elicitation "+strconv.Quote(key)+
				" (action "+string(action)+"); the backend cannot complete the request without it")
			return false
		}
	}
	raw := withoutRetryMembers(x.Raw, &x.Msg)
	var m codec.Message
	if raw == nil || codec.Scan(raw, &m) != nil {
		rep.replyErr(x, codec.CodeInternalError, "mcprouter: cannot rebuild the original request from its retry")
		return false
	}
	// x.Raw is the exchange's own copy (as routing's completion rewrite relies on).
	x.Raw, x.Msg = raw, m
	return true
}

// withoutRetryMembers returns msg (scanned into m) with its params' inputResponses and
// requestState removed: the request a 2025 backend knows. nil when params is no object.
func withoutRetryMembers(msg []byte, m *codec.Message) []byte {
	var w codec.Walker
	if !w.Object(m.Params) {
		return nil
	}
	params := []byte{'{'}
	for k, _, v, ok := w.Next(); ok; k, _, v, ok = w.Next() {
		if codec.KeyIs(k, "inputResponses") || codec.KeyIs(k, "requestState") {
			continue
		}
		if len(params) > 1 {
			params = append(params, ',')
		}
		params = append(append(append(append(params, '"'), k...), `":`...), v...)
	}
	params = append(params, '}')
	return codec.AppendSplices(nil, msg, []codec.Splice{{Old: m.Params, New: params}})
}

// urlStateCount is the count of elicitations of a URL state's opened payload, 0 when
// payload is not one.
func urlStateCount(payload []byte) int {
	if len(payload) != urlPayloadSize || payload[8] != 'u' || payload[9] == 0 {
		return 0
	}
	return int(payload[9])
}

// missingCapability returns the client capability a backend's request of method with
// params needs and the client's declared capabilities caps lack, "" when none: the
// method's (capabilityFor), and for a URL-mode elicitation elicitation.url too (a bare
// elicitation capability means form mode alone).
func missingCapability(caps []byte, method string, params []byte) string {
	capName := capabilityFor(method)
	switch {
	case capName == "":
		return ""
	case !hasMember(caps, capName):
		return capName
	case capName == "elicitation" && isURLMode(params) && !hasMember(codec.Member(caps, capName), "url"):
		return "elicitation.url"
	}
	return ""
}

// isURLMode reports whether an elicitation/create's params ask in URL mode.
func isURLMode(params []byte) bool { return string(codec.Member(params, "mode")) == `"url"` }

// requiredCapabilities is the data of an error refusing a client that lacks capability
// (missingCapability's "sampling" or "elicitation.url").
func requiredCapabilities(capability string) []byte {
	name, sub, _ := strings.Cut(capability, ".")
	inner := "{}"
	if sub != "" {
		inner = `{"` + sub + `":{}}`
	}
	return []byte(`{"requiredCapabilities":{"` + name + `":` + inner + `}}`)
}

var _ router.ErrorReshaper = (*Fleet)(nil)
