package codec

import (
	"errors"
	"strconv"
	"time"
)

// The JSON-RPC error codes mcprouter answers with: the one table for every layer (the
// README's table of error codes is checked against it by a test). The codec itself only
// ever produces CodeParseError and CodeInvalidRequest; the others live here so that every
// layer maps errors to the same numbers without importing each other.
const (
	// JSON-RPC 2.0's own codes.
	CodeParseError     = -32700 // the bytes are not valid JSON (or not valid UTF-8)
	CodeInvalidRequest = -32600 // valid JSON, but not a valid JSON-RPC 2.0 message
	CodeMethodNotFound = -32601 // unknown method
	CodeInvalidParams  = -32602 // unknown tool or prompt, invalid cursor, invalid params
	CodeInternalError  = -32603 // a handler panic, or an error the router cannot name better

	// The implementation-defined server range (-32000..-32099). MCP itself uses -32002
	// for an unknown resource; the router's own codes start at -32010 so that they do not
	// collide with MCP's.
	CodeOverloaded         = -32000 // refused by backpressure or shutdown; data.retryAfterMs says when to retry
	CodeResourceNotFound   = -32002 // MCP's code for a resource URI nobody serves
	CodeBackendUnavailable = -32010 // no instance reachable, or the connection failed
	CodeBackendTimeout     = -32011 // no answer within the backend's timeout
	CodeBackendBusy        = -32012 // the backend's concurrency limit is reached
	CodeClientTimeout      = -32013 // to a backend: the client did not answer its request in time
	CodeClientGone         = -32014 // to a backend: the client session ended before answering
	CodeSessionLimit       = -32015 // a per-session limit (subscriptions, pending requests) is reached
	CodeBackendAuth        = -32016 // the backend refused the router's own credentials for it (HTTP 401 or 403)
	CodePolicyDenied       = -32017 // the policy's rules deny the request; the message names what and which rule
	CodeRateLimited        = -32018 // a policy rate limit refused the request; data.retryAfterMs says when to retry

	// MCP 2026-07-28's own codes (-32020..-32099 is reserved to the specification). A
	// 2026-07-28 request that breaks a per-request rule gets one of these with HTTP 400.
	CodeHeaderMismatch     = -32020 // an Mcp-Method, Mcp-Name or MCP-Protocol-Version header disagrees with the body
	CodeMissingCapability  = -32021 // the request needs a client capability its _meta did not declare; data.requiredCapabilities
	CodeUnsupportedVersion = -32022 // the protocol version is not served; data.supported and data.requested
)

// Codes of the specification that the router meets in backends' answers and never makes
// itself. They are kept here so that the codes have one table, but apart: the README's
// table, of the errors the router makes, leaves them out, and TestErrorCodesInREADME
// checks that too.
const (
	// CodeURLElicitationRequired is 2025-11-25's "URL elicitation required", which
	// 2026-07-28 reserves and forbids emitting: the fleet reshapes it into an
	// input_required result for a 2026 client (router/modern's CodeMappings).
	CodeURLElicitationRequired = -32042
)

// AppendRetryData appends the data of a CodeOverloaded error, {"retryAfterMs":N}, N being
// d in whole milliseconds rounded up and at least 1 (a hint of 0 would invite an
// immediate retry storm).
func AppendRetryData(dst []byte, d time.Duration) []byte {
	ms := (d + time.Millisecond - 1) / time.Millisecond
	if ms < 1 {
		ms = 1
	}
	dst = append(dst, `{"retryAfterMs":`...)
	dst = strconv.AppendInt(dst, int64(ms), 10)
	return append(dst, '}')
}

// Sentinel errors, to be matched with errors.Is against any error this package returns.
// A *Error matches ErrParse or ErrInvalidRequest according to its Code; an oversized
// message from the Decoder also matches ErrTooLarge.
var (
	ErrParse          = errors.New("codec: parse error")
	ErrInvalidRequest = errors.New("codec: invalid request")
	ErrTooLarge       = errors.New("codec: message too large")
)

// Error describes why a message was rejected: the JSON-RPC code to answer with, what was
// wrong, and where. It is meant to become the error response's `data` so that the peer
// can see its mistake.
type Error struct {
	// Code is CodeParseError or CodeInvalidRequest.
	Code int
	// Reason says what was wrong, in a few words ("invalid UTF-8 in string").
	Reason string
	// Offset is the byte offset in the scanned input where the problem was found.
	Offset int

	// also is a further sentinel this error matches (ErrTooLarge), nil if none. It is
	// unexported so that errors.Is stays the only way to ask.
	also error
}

// Error formats the error as "codec: <class> at byte <offset>: <reason>".
func (e *Error) Error() string {
	b := make([]byte, 0, 48+len(e.Reason))
	b = append(b, "codec: "...)
	switch e.Code {
	case CodeParseError:
		b = append(b, "parse error"...)
	case CodeInvalidRequest:
		b = append(b, "invalid request"...)
	default:
		b = append(b, "error "...)
		b = strconv.AppendInt(b, int64(e.Code), 10)
	}
	b = append(b, " at byte "...)
	b = strconv.AppendInt(b, int64(e.Offset), 10)
	b = append(b, ": "...)
	b = append(b, e.Reason...)
	return string(b)
}

// Is reports whether e matches target: ErrParse for CodeParseError, ErrInvalidRequest
// for CodeInvalidRequest, ErrTooLarge for an oversized message.
func (e *Error) Is(target error) bool {
	switch target {
	case ErrParse:
		return e.Code == CodeParseError
	case ErrInvalidRequest:
		return e.Code == CodeInvalidRequest
	}
	return e.also != nil && target == e.also
}

// Reasons. They are constants so that tests (and only tests) can tell error classes
// apart beyond the code; callers use errors.Is and Code.
const (
	// Parse errors (-32700).
	reasonEmpty        = "empty input"
	reasonEOF          = "unexpected end of input"
	reasonUnexpected   = "unexpected character"
	reasonExpectKey    = "expected a string object key"
	reasonExpectColon  = "expected ':' after object key"
	reasonExpectComma  = "expected ',' or a closing bracket"
	reasonTrailing     = "data after the end of the message"
	reasonControl      = "unescaped control character in string"
	reasonBadEscape    = "invalid escape sequence in string"
	reasonBadUTF8      = "invalid UTF-8"
	reasonBadNumber    = "invalid number"
	reasonBadLiteral   = "invalid literal"
	reasonTooDeep      = "nesting deeper than 128 levels"
	reasonUnterminated = "unterminated string"

	// Invalid request errors (-32600).
	reasonNotObject       = "message is not a JSON object"
	reasonNoJSONRPC       = `missing "jsonrpc" member`
	reasonBadJSONRPC      = `"jsonrpc" must be exactly "2.0"`
	reasonBadID           = `"id" must be a string or an integer`
	reasonNullID          = `"id" must not be null except in an error response`
	reasonNoID            = `response without "id"`
	reasonBadMethod       = `"method" must be a string`
	reasonBadParams       = `"params" must be an object or an array`
	reasonBothResErr      = `response has both "result" and "error"`
	reasonMethodAndResp   = `message has both "method" and "result" or "error"`
	reasonNoKind          = `message has none of "method", "result", "error"`
	reasonParamsInResp    = `response must not have "params"`
	reasonBadError        = `"error" must be an object with an integer "code" and a string "message"`
	reasonDupMember       = "duplicate member"
	reasonDupParam        = "duplicate routing member in params"
	reasonEmptyBatch      = "empty batch"
	reasonNotArray        = "batch is not a JSON array"
	reasonTooLarge        = "message exceeds the size limit"
	reasonListNotArray    = "list member is not an array"
	reasonResultNotObject = "result is not a JSON object"
)

func parseError(reason string, off int) *Error {
	return &Error{Code: CodeParseError, Reason: reason, Offset: off}
}

func invalidError(reason string, off int) *Error {
	return &Error{Code: CodeInvalidRequest, Reason: reason, Offset: off}
}
