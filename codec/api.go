// Package codec is mcprouter's zero-copy JSON-RPC 2.0 codec: it scans a message once,
// validating it fully, and returns views (sub-slices) of the input for everything a
// router needs to route on a peek. It never builds a tree and allocates nothing on its
// hot path.
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
)

// Message is a view over one scanned JSON-RPC message. Every slice is a sub-slice of
// the scanned input (zero copies) and is valid as long as that input is.
//
// String-valued peeks (Method, Name, URI, Cursor) hold the string contents without the
// quotes, escapes intact. Token-valued fields (ID, ProgressToken, RequestID) hold the raw
// JSON token exactly as sent, quotes included for strings, so that string and number ids
// stay distinct. Raw values (Params, Result, Error) hold the whole JSON value.
// A nil slice means the member was absent.
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
	ProgressToken []byte // params._meta.progressToken raw token
	RequestID     []byte // params.requestId raw token (notifications/cancelled)
	Cursor        []byte // params.cursor string contents
}
