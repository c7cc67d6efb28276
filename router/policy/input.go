package policy

import (
	"errors"
	"unsafe"

	"github.com/google/cel-go/common/types/ref"

	"github.com/mcprouter/mcprouter/codec"
)

// The methods the rules decide (see Decided).
const (
	MethodToolsCall   = "tools/call"
	MethodPromptsGet  = "prompts/get"
	MethodRead        = "resources/read"
	MethodSubscribe   = "resources/subscribe"
	MethodComplete    = "completion/complete"
	MethodListen      = "subscriptions/listen"
	methodUnsubscribe = "resources/unsubscribe"
)

// Input is what the rules see of one request: the CEL variables mcp.*. Build it with
// FromMessage (from the router's scanned message) or ParseInput (from raw bytes), then
// set Backend once the request is routed. Its views point into the request's bytes
// (the raw params, and Tool, Prompt and URI as FromMessage reads them, without a
// copy): an Input is valid as long as they are, and is used by one goroutine. What
// outlives the request copies them (the plans' keys, the limits' keys).
type Input struct {
	Method  string // mcp.method
	Backend string // mcp.backend: the backend the request is routed to, "" if none
	Tool    string // mcp.tool: the exposed tool name of a tools/call
	Prompt  string // mcp.prompt: prompts/get, or a completion of a prompt argument
	URI     string // mcp.uri: resources/read and subscribe, a completion of a template

	params   []byte // raw params, where the arguments are read from (lazily)
	complete bool   // completion/complete: the arguments are params.argument and context.arguments

	// The activation's state: the subject of the evaluation under way, the CEL values
	// made so far (each variable once per Input), and the arguments once parsed.
	subj    *Subject
	vals    [len(variables)]ref.Val
	args    ref.Val
	argsErr error
	unknown uses // variables a catalog item does not know (partial evaluation)
	made    bool // some of vals, args or argsErr are set (reset clears them)
}

// ErrInput is matched (errors.Is) by the errors of FromMessage and ParseInput: the
// request's params do not say what the rules need (a completion's ref that is not an
// object, a repeated member). The router answers -32602 (invalid params).
var ErrInput = errors.New("policy: unreadable request")

// ParseInput scans raw (one JSON-RPC request or notification) with the codec and fills
// in from it; see FromMessage. A message the codec refuses returns its *codec.Error.
func ParseInput(raw []byte, in *Input) error {
	var m codec.Message
	if err := codec.Scan(raw, &m); err != nil {
		return err
	}
	if m.Kind != codec.KindRequest && m.Kind != codec.KindNotification {
		*in = Input{}
		return errors.Join(ErrInput, errors.New("not a request"))
	}
	return in.FromMessage(&m)
}

// FromMessage fills in from a scanned request (codec.Scan): the method, and the tool,
// prompt or URI the method names (params.name, params.uri, or a completion's
// params.ref). The arguments are read later, only if a rule references mcp.arguments.
// Backend is left empty.
func (in *Input) FromMessage(m *codec.Message) error {
	in.reset(m.Params)
	method, err := text(m.Method, m.Flags&codec.MethodEscaped != 0)
	if err != nil {
		return err
	}
	in.Method = method
	switch method {
	case MethodToolsCall:
		in.Tool, err = viewText(m.Name, m.Flags&codec.NameEscaped != 0)
	case MethodPromptsGet:
		in.Prompt, err = viewText(m.Name, m.Flags&codec.NameEscaped != 0)
	case MethodRead, MethodSubscribe, methodUnsubscribe:
		in.URI, err = viewText(m.URI, m.Flags&codec.URIEscaped != 0)
	case MethodComplete:
		in.complete = true
		err = in.completionRef()
	}
	return err
}

// reset makes in the empty Input of a request with params. It writes the fields one by
// one rather than assigning a zero Input: the router recycles its Inputs (heap objects
// with some thirty pointer slots), and a whole-struct write pays the garbage
// collector's write barrier on every slot while a collection runs; the CEL values are
// cleared only when an evaluation made some.
func (in *Input) reset(params []byte) {
	in.Method, in.Backend, in.Tool, in.Prompt, in.URI = "", "", "", "", ""
	in.params, in.complete, in.subj, in.unknown = params, false, nil, 0
	if in.made {
		in.vals, in.args, in.argsErr, in.made = [len(variables)]ref.Val{}, nil, nil, false
	}
}

// ListenEntry fills in for one resource subscription of a 2026-07-28
// subscriptions/listen: it is decided as the resources/subscribe of its URI, so that one
// rule covers both generations of the protocol.
func (in *Input) ListenEntry(uri, backend string) {
	*in = Input{Method: MethodSubscribe, URI: uri, Backend: backend}
}

// text returns a view's string, decoding escapes when there are any. Known method
// names come back as constants (no allocation on the hot path).
func text(view []byte, escaped bool) (string, error) {
	if escaped {
		b, err := codec.Unquote(nil, view)
		if err != nil {
			return "", errors.Join(ErrInput, err)
		}
		return string(b), nil
	}
	switch string(view) {
	case MethodToolsCall:
		return MethodToolsCall, nil
	case MethodPromptsGet:
		return MethodPromptsGet, nil
	case MethodRead:
		return MethodRead, nil
	case MethodSubscribe:
		return MethodSubscribe, nil
	case MethodComplete:
		return MethodComplete, nil
	case "tools/list":
		return "tools/list", nil
	}
	return string(view), nil
}

// viewText is text without a copy: the string of an unescaped view shares its bytes
// (an Input's names point into the request's bytes, as its params do).
func viewText(view []byte, escaped bool) (string, error) {
	if escaped || len(view) == 0 {
		return text(view, escaped)
	}
	return unsafe.String(&view[0], len(view)), nil
}

// Decided reports whether the rules decide method; every other method is allowed for
// an authenticated principal (initialize, ping, notifications, the lists, logging,
// unsubscribing...).
func Decided(method string) bool {
	switch method {
	case MethodToolsCall, MethodPromptsGet, MethodRead, MethodSubscribe, MethodComplete:
		return true
	}
	return false
}
