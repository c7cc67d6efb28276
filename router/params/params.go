package params

import (
	"errors"

	"github.com/mcprouter/mcprouter/codec"
)

// ErrInvalidParams matches every *Error with errors.Is.
var ErrInvalidParams = errors.New("params: invalid params")

// Error says which member of params breaks the schema and how. The router answers it
// with codec.CodeInvalidParams (Code) and Error() as the message.
type Error struct {
	// Path names the member from params down: "params", "params.uri",
	// "params.ref.type", "params.messages[2].role", `params._meta["io.modelcontextprotocol/protocolVersion"]`.
	Path string
	// Reason is what is wrong: "required", "must be a string", `must be one of "debug", "info"`.
	Reason string
}

// Error returns "<path>: <reason>", the message of the -32602 answer.
func (e *Error) Error() string { return e.Path + ": " + e.Reason }

// Is reports whether target is ErrInvalidParams.
func (e *Error) Is(target error) bool { return target == ErrInvalidParams }

// Code is the JSON-RPC error code to answer with: codec.CodeInvalidParams.
func (e *Error) Code() int { return codec.CodeInvalidParams }

// AppendData appends the error's data member, {"path":"params.uri","reason":"required"},
// for clients that act on the member rather than parse the message.
func (e *Error) AppendData(dst []byte) []byte {
	dst = append(dst, `{"path":`...)
	dst = codec.AppendString(dst, e.Path)
	dst = append(dst, `,"reason":`...)
	dst = codec.AppendString(dst, e.Reason)
	return append(dst, '}')
}

// Validate checks params (the raw params value of a message that codec.Scan accepted,
// nil when the message has none) of method (decoded: the caller unquotes an escaped
// method, as it does to dispatch) against the schema of revision ("2025-11-25"). It
// returns nil when they conform, or when the revision or the method is not one the
// tables know, and otherwise an *Error naming the first member found wrong. It does not
// allocate unless it returns an error.
func Validate[S string | []byte](revision string, method S, params []byte) error {
	return validate(revision, method, params, nil)
}

// validate is Validate, with sk for ValidateJudged.
func validate[S string | []byte](revision string, method S, params []byte, sk *skip) error {
	rev := revisionIndex(revision)
	if rev < 0 {
		return nil
	}
	r, required, ok := lookup(rev, method)
	if !ok {
		return nil
	}
	if len(params) == 0 {
		if required {
			return &Error{Path: "params", Reason: reasonRequired}
		}
		return nil
	}
	if e := checkParams(&rules[r], params, sk); e != nil {
		return e.at("params")
	}
	return nil
}

// Known reports whether revision has method in the tables, so that a caller can tell a
// method the revision does not define from one whose params are fine.
func Known[S string | []byte](revision string, method S) bool {
	rev := revisionIndex(revision)
	if rev < 0 {
		return false
	}
	_, _, ok := lookup(rev, method)
	return ok
}

// paramsRule is what the tables say of a method's params in one revision: the rule
// (an index into rules), whether params is required, and whether the revision has the
// method at all.
type paramsRule struct {
	rule     uint16
	required bool
	ok       bool
}

// lookup returns the params rule of method in revision rev (an index into revisions)
// and whether params is required; ok is false for a method the revision does not have.
func lookup[S string | []byte](rev int, method S) (r uint16, required, ok bool) {
	m := methodIndex(method)
	if m < 0 {
		return 0, false, false
	}
	e := methodRules[m][rev]
	return e.rule, e.required, e.ok
}

// Revisions returns the revisions the tables cover, oldest first.
func Revisions() []string { return revisions[:] }

func revisionIndex(revision string) int {
	for i, r := range revisions {
		if r == revision {
			return i
		}
	}
	return -1
}
