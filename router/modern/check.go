package modern

import (
	"net/http"
	"strconv"

	"github.com/mcprouter/mcprouter/codec"
)

// Reject is the verdict on a request that breaks a per-request rule: the JSON-RPC error
// to answer with and, on HTTP, the status. The zero value means "no objection". It is a
// value (no allocation); its data is appended on demand by AppendError.
type Reject struct {
	Code    int    // JSON-RPC code; 0 when the request passes
	Status  int    // HTTP status of the answer (400 or 404)
	Message string // constant wording, never built per request

	// Requested is the version the client asked for (-32022: data.requested).
	Requested []byte
	// Missing are the capabilities the request needs and the client did not declare
	// (-32021: data.requiredCapabilities).
	Missing Capability
}

// OK reports whether the request passed.
func (r *Reject) OK() bool { return r.Code == 0 }

// Error makes Reject an error for callers that carry it as one.
func (r *Reject) Error() string {
	return "mcp " + strconv.Itoa(r.Code) + ": " + r.Message
}

// AppendData appends the error's data object (nil when it has none): supported and
// requested for -32022, requiredCapabilities for -32021.
func (r *Reject) AppendData(dst []byte, supported []string) []byte {
	switch r.Code {
	case codec.CodeUnsupportedVersion:
		dst = append(dst, `{"supported":[`...)
		for i, v := range supported {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = codec.AppendString(dst, v)
		}
		dst = append(dst, `],"requested":`...)
		// Requested holds string contents of a scanned message, already valid between
		// quotes (escapes intact).
		dst = append(dst, '"')
		dst = append(dst, r.Requested...)
		return append(dst, '"', '}')
	case codec.CodeMissingCapability:
		dst = append(dst, `{"requiredCapabilities":`...)
		dst = AppendCapabilities(dst, r.Missing)
		return append(dst, '}')
	}
	return dst
}

// AppendError appends the JSON-RPC error response to the request with the given id.
func (r *Reject) AppendError(dst, id []byte, supported []string) []byte {
	if r.Code != codec.CodeUnsupportedVersion && r.Code != codec.CodeMissingCapability {
		return codec.AppendError(dst, id, r.Code, r.Message, nil)
	}
	// The data goes straight into dst: codec.AppendError's response ends with the two
	// closing braces of error and response, which the data goes before.
	dst = codec.AppendError(dst, id, r.Code, r.Message, nil)
	dst = append(dst[:len(dst)-2], `,"data":`...)
	dst = r.AppendData(dst, supported)
	return append(dst, '}', '}')
}

// Rejections, one per rule. Messages are constants so that a rejected request costs no
// allocation either.
var (
	rejectNoMeta    = invalidParams("a 2026-07-28 request needs params._meta with " + KeyProtocolVersion + " and " + KeyClientCapabilities)
	rejectNoVersion = invalidParams("_meta." + KeyProtocolVersion + " (a string) is required")
	rejectNoCaps    = invalidParams("_meta." + KeyClientCapabilities + " (an object) is required")
	rejectVersion   = Reject{Code: codec.CodeUnsupportedVersion, Status: http.StatusBadRequest,
		Message: "Unsupported protocol version"}
	rejectMissingCaps = Reject{Code: codec.CodeMissingCapability, Status: http.StatusBadRequest,
		Message: "Missing required client capability"}
	rejectUnknown = Reject{Code: codec.CodeMethodNotFound, Status: http.StatusNotFound,
		Message: "Method not found"}
	rejectNotDeclared = Reject{Code: codec.CodeMethodNotFound, Status: http.StatusNotFound,
		Message: "Method not found: the method belongs to an extension the client did not declare in its capabilities"}
)

// invalidParams is the -32602 rejection (HTTP 400) of a request whose params the
// revision refuses: a _meta without what it requires, a requestState Open refused.
func invalidParams(why string) Reject {
	return Reject{Code: codec.CodeInvalidParams, Status: http.StatusBadRequest, Message: "Invalid params: " + why}
}

// Checker judges requests against the versions a server speaks.
type Checker struct {
	// Supported lists the protocol versions served, preferred first: the data of -32022
	// and the supportedVersions of server/discover. A dual-era server lists its 2025
	// revisions too (a client may retry with one of them, the legacy way).
	Supported []string
}

// Check judges a request that claims the modern era (Meta.Claimed): m is its scan, meta
// its ReadMeta, h its HTTP headers (nil on stdio, which has none). The order is the
// specification's: a malformed _meta first (-32602), then the headers against the body
// (-32020), then the version (-32022), then the method (-32601, HTTP 404). Capabilities a
// particular request needs are judged later by Require, when the server knows them.
// It allocates nothing.
func (c *Checker) Check(m *codec.Message, meta *Meta, h *Headers) Reject {
	switch {
	case !meta.Present:
		return rejectNoMeta
	case meta.Version == nil:
		return rejectNoVersion
	case meta.Capabilities == nil:
		return rejectNoCaps
	}
	var mb [64]byte
	method := decoded(mb[:0], m.Method, m.Flags&codec.MethodEscaped != 0)
	def := LookupMethod(method)
	if h != nil {
		if r := checkHeaders(h, m, meta, method, def); r != nil {
			return *r
		}
	}
	if !c.supports(meta.Version) {
		r := rejectVersion
		r.Requested = meta.Version
		return r
	}
	if def == nil {
		if why := Removed(method); why != "" {
			r := rejectUnknown
			r.Message = why
			return r
		}
		return rejectUnknown
	}
	if def.Extension == TasksExtension && meta.Caps&CapTasks == 0 {
		return rejectNotDeclared
	}
	return Reject{}
}

func (c *Checker) supports(v []byte) bool {
	for _, s := range c.Supported {
		if s == string(v) {
			return true
		}
	}
	return false
}

// Require judges whether the client declared every capability in need (the
// capabilities serving this request would use: sampling for a tool that samples...).
func Require(meta *Meta, need Capability) Reject {
	if missing := need &^ meta.Caps; missing != 0 {
		r := rejectMissingCaps
		r.Missing = missing
		return r
	}
	return Reject{}
}

// decoded returns contents, unescaped into buf when escaped (rare: a client has no reason
// to escape a method name).
func decoded(buf, contents []byte, escaped bool) []byte {
	if !escaped {
		return contents
	}
	if d, err := codec.Unquote(buf, contents); err == nil {
		return d
	}
	return contents
}
