package fleet

import (
	"net/http"
	"strconv"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/router"
	"github.com/mcprouter/mcprouter/router/policy"
	"github.com/mcprouter/mcprouter/transport"
)

// The rules on a 2026-07-28 subscriptions/listen: each resource URI of its filter is
// decided as the resources/subscribe of that URI on the backend that serves it
// (policy.Input.ListenEntry), so that one rule covers both generations of the protocol
// (mcp.method is "resources/subscribe", mcp.uri the entry's URI). An entry the rules
// deny is left out of the acknowledgement, which says which subset of the filter the
// router honours, as it does for what no backend serves; a filter of which nothing
// would be honoured because the rules denied its every entry is refused whole. The
// list changes of the filter are not decided: lists are allowed to every principal,
// and what they show is already filtered. The entries are not counted by the rate
// limits (they are not requests).

// listenEntries returns the URIs of a listen request's resourceSubscriptions that the
// rules allow (those no backend serves stay, for subscribeResources to leave out), each
// denial audited. honoursMore tells whether the acknowledgement honours something else
// (a list change). When the rules denied every entry and nothing else is honoured, it
// answers x with -32017 naming the denial (403 for a POST of that one request) and
// returns false.
func (p *policer) listenEntries(rep *reporter, s *router.Session, x *transport.Exchange, cat *catalog, uris []string, honoursMore bool) ([]string, bool) {
	e := p.engine(s, x)
	if e == nil || len(uris) == 0 {
		return uris, true
	}
	sub := p.subject(s, x)
	allowed := make([]string, 0, len(uris))
	var first string // the first denial's message
	denied, served := 0, 0
	var in policy.Input
	for _, uri := range uris {
		b := cat.resourceOwner(uri)
		if b == nil {
			allowed = append(allowed, uri)
			continue
		}
		in.ListenEntry(uri, b.cfg.Name)
		d := e.Decide(sub, &in)
		if d.Allowed {
			allowed = append(allowed, uri)
			served++
			continue
		}
		p.audit(e, s, x, &policy.Event{Subject: sub, Input: &in, Outcome: policy.OutcomeDenied, Decision: &d})
		if denied++; denied == 1 {
			first = d.Message(&in)
		}
	}
	if denied == 0 || served > 0 || honoursMore {
		return allowed, true
	}
	msg := "subscriptions/listen refused: " + first
	if denied > 1 {
		msg += " (and " + strconv.Itoa(denied-1) + " more resource subscriptions)"
	}
	refuseWhole(x, http.StatusForbidden)
	rep.replyErr(x, codec.CodePolicyDenied, msg)
	return nil, false
}
