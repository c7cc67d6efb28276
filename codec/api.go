// Package codec is mcprouter's zero-copy JSON-RPC 2.0 codec: it scans a message once,
// validating it fully, and returns views (sub-slices) of the input for everything a
// router needs to route on a peek. It never builds a tree and allocates nothing on its
// hot path.
//
// The parts:
//
//   - Scan validates one message (RFC 8259 syntax, UTF-8, depth, then the JSON-RPC
//     envelope) and fills a Message with views: kind, raw id, method, raw params,
//     result and error, and the routing peeks params.name, params.uri,
//     params._meta.progressToken, params.requestId and params.cursor, and params._meta
//     itself, for what rewrites it in place.
//   - IsBatch and SplitBatch split a batch into element views over the same buffer.
//   - Decoder frames a stream (stdio lines, SSE data payloads, a body read in chunks)
//     into messages and batch elements as soon as each is complete, with a size limit
//     per message.
//   - AppendResult, AppendError, AppendRequest, AppendNotification, AppendString and
//     AppendQuote encode, in the append style; Unquote decodes an escaped view.
//   - AppendSplices, AppendReplaceID, AppendReplaceProgressToken, AppendPrefixListNames
//     and AppendStripListNames rewrite a message for forwarding by copying its bytes
//     with some spans replaced, never by decoding and re-encoding it.
//
// Errors are *Error values carrying the JSON-RPC code (CodeParseError or
// CodeInvalidRequest), a reason and a byte offset; match them with errors.Is against
// ErrParse, ErrInvalidRequest and ErrTooLarge.
package codec

// Kind is the kind of a JSON-RPC message.
type Kind uint8

const (
	KindInvalid      Kind = iota
	KindRequest           // has method and id
	KindNotification      // has method, no id
	KindResult            // success response: id and result
	KindError             // error response: id (possibly null) and error
)

// Flags record facts about a scanned message that the views alone do not show.
type Flags uint8

const (
	// MethodEscaped and the others say that the string contents contain a backslash
	// escape, so comparing the raw view to a plain string is not enough: use Unquote.
	MethodEscaped Flags = 1 << iota
	NameEscaped
	URIEscaped
	CursorEscaped
	// MetaReserved says that params._meta has members and every one of them has a key
	// under ReservedMetaPrefix, written without escapes (a progressToken is not): what
	// drops the revision's keys from a request for a backend that must not see them
	// drops the whole inside of Meta, without walking it again.
	MetaReserved
	// StateMember says that params has a requestState member (a client's retry of a
	// request that was answered input_required, 2026-07-28): the router looks into that
	// member only for a request Scan saw it in, where it searched every stateless
	// request's params for a state of its own.
	StateMember
)

// ReservedMetaPrefix starts the _meta keys the MCP revisions reserve for themselves
// (io.modelcontextprotocol/protocolVersion...), which MetaReserved is about.
const ReservedMetaPrefix = "io.modelcontextprotocol/"

// Message is a view over one scanned JSON-RPC message. Every slice is a sub-slice of
// the scanned input (zero copies) and is valid as long as that input is.
//
// String-valued peeks (Method, Name, URI, Cursor) hold the string contents without the
// quotes, escapes intact (the matching *Escaped flag says when Unquote is needed).
// Token-valued fields (ID, ProgressToken, RequestID) hold the raw JSON token exactly as
// sent, quotes included for strings, so that string and number ids stay distinct and
// can be echoed or spliced back byte for byte. Raw values (Params, Result, Error) hold
// the whole JSON value.
//
// A nil slice means the member was absent, or, for the params peeks, present with a
// type it may not have (a numeric "name", an object "progressToken"): routing then
// falls to the method's own validation. The peeks are read from params (and
// params._meta) only when params is an object.
type Message struct {
	Kind          Kind
	Flags         Flags
	ID            []byte // raw id token; for KindError with a null id: the 4 bytes `null`
	Method        []byte // method string contents
	Params        []byte // raw params value (object or array)
	Result        []byte // raw result value
	Error         []byte // raw error object
	Name          []byte // params.name string contents
	URI           []byte // params.uri string contents
	ProgressToken []byte // params._meta.progressToken (requests) or params.progressToken (notifications/progress), raw token
	Meta          []byte // raw params._meta object, for what rewrites it in place (no second walk of params)
	RequestID     []byte // params.requestId raw token (notifications/cancelled)
	Cursor        []byte // params.cursor string contents
}

var kindNames = [...]string{"invalid", "request", "notification", "result", "error"}

// String returns the kind's name: "request", "notification", "result", "error" or
// "invalid".
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "invalid"
}
