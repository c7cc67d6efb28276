package params

import (
	"sync/atomic"

	"github.com/mcprouter/mcprouter/codec"
)

// A 2026-07-28 request carries the client's revision, capabilities and clientInfo in
// its params._meta, and a client sends the same _meta with every request: its schema
// (the request's own members, most of its params) was checked anew each time, a walk
// over bytes already found to conform. A caller that keeps one Judgement per _meta it
// meets (the router keeps the last few, by their bytes) has it checked once per rule.

// Judgement remembers that one _meta's bytes conformed to the rule of a request's
// _meta, so that ValidateJudged passes the same bytes over when it meets them again
// under that rule. The zero value has judged nothing; goroutines may share it.
type Judgement struct {
	rule atomic.Uint32 // the index of the rule judged, plus one
}

// ValidateJudged is Validate of params whose _meta is meta (the view codec.Scan recorded
// of the same bytes, codec.Message.Meta), where j is the Judgement of meta's bytes: the
// caller must give the same j only with equal bytes. A _meta j found conforming to the
// rule the method's params give it is passed over without a walk (codec.Walker.Pass);
// one checked and found conforming is remembered in j. The error, if any, is the one
// Validate returns: a member passed over had conformed. j or meta nil: Validate.
func ValidateJudged[S string | []byte](revision string, method S, params, meta []byte, j *Judgement) error {
	if j == nil || meta == nil {
		return validate(revision, method, params, nil)
	}
	return validate(revision, method, params, &skip{meta: meta, j: j})
}

// skip is the _meta of the params ValidateJudged checks and its Judgement.
type skip struct {
	meta []byte
	j    *Judgement
}

// checkParams checks params against their rule r, as check does; with sk, when r is
// an object's members, walking them with sk (walkObject).
func checkParams(r *rule, params []byte, sk *skip) *Error {
	if sk == nil || r.members == nil || r.tag != "" || r.anyOf != nil ||
		r.kinds != 0 && r.kinds&kObject == 0 || kindOf(params) != kObject {
		return check(r, params)
	}
	var w codec.Walker
	w.Object(params)
	return walkObject(r, &w, sk)
}
