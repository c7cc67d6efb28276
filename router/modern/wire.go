package modern

import (
	"github.com/mcprouter/mcprouter/codec"
)

// In-place encoders for what crosses eras on the wire: the per-request _meta the router
// adds to a request it forwards to a 2026-07-28 backend, the InputRequiredResult it
// builds from a 2025 backend's server-to-client request, and the retry it sends a
// 2026-07-28 backend after a 2025 client answered. Each copies the message once with a
// few splices (codec.AppendSplices) and allocates nothing beyond growing dst.

// AppendMetaFields appends the members of a per-request _meta (no braces): the version,
// the client's capabilities (raw object; nil writes {}), and when given the client info
// (raw object) and log level. The router builds them once per session (a 2025 client's
// initialize) or once at startup (its own shared sessions) and splices them into every
// request with AppendWithMeta.
func AppendMetaFields(dst []byte, version string, caps, clientInfo []byte, logLevel string) []byte {
	dst = append(dst, `"`+KeyProtocolVersion+`":`...)
	dst = codec.AppendString(dst, version)
	dst = append(dst, `,"`+KeyClientCapabilities+`":`...)
	if caps == nil {
		dst = append(dst, "{}"...)
	} else {
		dst = append(dst, caps...)
	}
	if clientInfo != nil {
		dst = append(dst, `,"`+KeyClientInfo+`":`...)
		dst = append(dst, clientInfo...)
	}
	if logLevel != "" {
		dst = append(dst, `,"`+KeyLogLevel+`":`...)
		dst = codec.AppendString(dst, logLevel)
	}
	return dst
}

// AppendWithMeta appends the request msg (scanned into m) with fields (AppendMetaFields)
// added to its params._meta: into the _meta it has (after a progressToken, say), into
// params without one, or as new params. Keys of fields that _meta already has are not
// checked: the router adds them to 2025 clients' requests, which have none.
func AppendWithMeta(dst, msg []byte, m *codec.Message, fields []byte) []byte {
	var sp [4]codec.Splice
	n := 0
	switch meta := codec.Member(m.Params, "_meta"); {
	case m.Params == nil || !isObject(m.Params):
		// No params (or an array, which MCP never uses): add an object before the
		// message's closing brace.
		end := lastBrace(msg)
		if end < 0 {
			return append(dst, msg...)
		}
		at := msg[end:end]
		sp[0] = codec.Splice{Old: at, New: paramsOpen}
		sp[1] = codec.Splice{Old: at, New: fields}
		sp[2] = codec.Splice{Old: at, New: paramsClose}
		n = 3
	case isObject(meta):
		at := meta[1:1]
		sp[0] = codec.Splice{Old: at, New: fields}
		n = 1
		if notEmpty(meta) {
			sp[1] = codec.Splice{Old: at, New: comma}
			n = 2
		}
	default:
		at := m.Params[1:1]
		sp[0] = codec.Splice{Old: at, New: metaOpen}
		sp[1] = codec.Splice{Old: at, New: fields}
		sp[2] = codec.Splice{Old: at, New: closeBrace}
		n = 3
		if notEmpty(m.Params) {
			sp[3] = codec.Splice{Old: at, New: comma}
			n = 4
		}
	}
	return codec.AppendSplices(dst, msg, sp[:n])
}

var (
	paramsOpen  = []byte(`,"params":{"_meta":{`)
	paramsClose = []byte(`}}`)
	metaOpen    = []byte(`"_meta":{`)
)

// notEmpty reports whether the object obj has a member.
func notEmpty(obj []byte) bool {
	i := skipWS(obj, 1)
	return i < len(obj) && obj[i] != '}'
}

// lastBrace is the index of the closing brace of a message, -1 if none.
func lastBrace(msg []byte) int {
	for i := len(msg) - 1; i >= 0; i-- {
		switch msg[i] {
		case '}':
			return i
		case ' ', '\t', '\n', '\r':
		default:
			return -1
		}
	}
	return -1
}

// InputRequest is one entry of an InputRequiredResult's inputRequests: a key the server
// chose, and the server-to-client request (method and raw params) it stands for.
type InputRequest struct {
	Key    string
	Method string
	Params []byte
}

// AppendInputRequired appends an InputRequiredResult object: what the router answers a
// 2026-07-28 client in place of a 2025 backend's server-to-client requests, with the
// sealed state (Sealer.Seal) the retry must echo. state "" leaves requestState out.
func AppendInputRequired(dst []byte, reqs []InputRequest, state string) []byte {
	dst = append(dst, `{"resultType":"input_required","inputRequests":{`...)
	for i, r := range reqs {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = codec.AppendString(dst, r.Key)
		dst = append(dst, `:{"method":`...)
		dst = codec.AppendString(dst, r.Method)
		if r.Params != nil {
			dst = append(dst, `,"params":`...)
			dst = append(dst, r.Params...)
		}
		dst = append(dst, '}')
	}
	dst = append(dst, '}')
	if state != "" {
		dst = append(dst, `,"requestState":`...)
		dst = codec.AppendString(dst, state)
	}
	return append(dst, '}')
}

// EachInputRequest calls fn with the key (raw contents), method (raw contents) and raw
// params of each entry of an InputRequiredResult's inputRequests, until fn returns
// false: what the router turns into server-to-client requests on a 2025 client's
// session. Entries without a string method are skipped.
func EachInputRequest(result []byte, fn func(key, method, params []byte) bool) {
	eachMember(codec.Member(result, "inputRequests"), func(k, v []byte) bool {
		method, ok := stringContents(codec.Member(v, "method"))
		if !ok {
			return true
		}
		return fn(k, method, codec.Member(v, "params"))
	})
}

// InputResponse returns the raw answer under key in a retry's params.inputResponses,
// nil when the client gave none.
func InputResponse(params []byte, key string) []byte {
	return codec.Member(codec.Member(params, "inputResponses"), key)
}

// RequestState returns the contents of a retry's params.requestState (escapes intact),
// nil when absent or not a string.
func RequestState(params []byte) []byte {
	s, _ := stringContents(codec.Member(params, "requestState"))
	return s
}

// AppendRetry appends the retry of the original request msg (scanned into m) under the
// id newID (raw token), with params.inputResponses set to responses (a raw object) and
// params.requestState to state (raw JSON string token, nil for none), replacing the
// ones msg has: what the router sends a 2026-07-28 backend once a 2025 client answered
// the server-to-client requests it made of the backend's inputRequests.
func AppendRetry(dst, msg []byte, m *codec.Message, newID, responses, state []byte) []byte {
	var sp [8]codec.Splice
	n := 0
	sp[n] = codec.Splice{Old: m.ID, New: newID}
	n++
	if m.Params == nil || !isObject(m.Params) {
		end := lastBrace(msg)
		if end < 0 {
			return append(dst, msg...)
		}
		at := msg[end:end]
		sp[n] = codec.Splice{Old: at, New: retryParamsOpen}
		sp[n+1] = codec.Splice{Old: at, New: responses}
		n += 2
		if state != nil {
			sp[n] = codec.Splice{Old: at, New: stateKeyAfter}
			sp[n+1] = codec.Splice{Old: at, New: state}
			n += 2
		}
		sp[n] = codec.Splice{Old: at, New: closeBrace}
		return codec.AppendSplices(dst, msg, sp[:n+1])
	}
	var oldResp, oldState []byte
	members := 0
	eachMember(m.Params, func(k, v []byte) bool {
		members++
		switch {
		case codec.KeyIs(k, "inputResponses"):
			oldResp = v
		case codec.KeyIs(k, "requestState"):
			oldState = v
		}
		return true
	})
	// Insertions after the opening brace first, then the replacements and the removal:
	// at one position the splices keep their order.
	at := m.Params[1:1]
	inserted := false
	if oldResp == nil {
		sp[n] = codec.Splice{Old: at, New: respKey}
		sp[n+1] = codec.Splice{Old: at, New: responses}
		n += 2
		inserted = true
	}
	if state != nil && oldState == nil {
		if inserted {
			sp[n] = codec.Splice{Old: at, New: comma}
			n++
		}
		sp[n] = codec.Splice{Old: at, New: stateKey}
		sp[n+1] = codec.Splice{Old: at, New: state}
		n += 2
		inserted = true
	}
	remaining := members
	if oldState != nil && state == nil {
		remaining--
	}
	if inserted && remaining > 0 {
		sp[n] = codec.Splice{Old: at, New: comma}
		n++
	}
	if oldResp != nil {
		sp[n] = codec.Splice{Old: oldResp, New: responses}
		n++
	}
	switch {
	case oldState != nil && state != nil:
		sp[n] = codec.Splice{Old: oldState, New: state}
		n++
	case oldState != nil:
		// The backend gave no state this time: the retry must not carry the old one
		// (mrtr, client requirements). The member goes with one of its commas.
		if span := memberSpan(m.Params, oldState); span != nil {
			sp[n] = codec.Splice{Old: span, New: nil}
			n++
		}
	}
	return codec.AppendSplices(dst, msg, sp[:n])
}

var (
	retryParamsOpen = []byte(`,"params":{"inputResponses":`)
	respKey         = []byte(`"inputResponses":`)
	stateKey        = []byte(`"requestState":`)
	stateKeyAfter   = []byte(`,"requestState":`)
)

// memberSpan returns the view of obj that removing the member whose value is val takes
// away: the key, the colon, the value and one comma (the one after it, or else the one
// before it), nil if val is not a member value of obj. val must be a view into obj.
func memberSpan(obj, val []byte) []byte {
	start := cap(obj) - cap(val) // offset of val in obj: both views of one array
	end := start + len(val)
	if start <= 0 || end > len(obj) {
		return nil
	}
	i := start - 1
	for i > 0 && (obj[i] == ' ' || obj[i] == '\t' || obj[i] == '\n' || obj[i] == '\r') {
		i--
	}
	if obj[i] != ':' {
		return nil
	}
	i--
	for i > 0 && (obj[i] == ' ' || obj[i] == '\t' || obj[i] == '\n' || obj[i] == '\r') {
		i--
	}
	if obj[i] != '"' {
		return nil
	}
	// Back to the key's opening quote: the first quote not escaped by a backslash.
	for i--; i > 0; i-- {
		if obj[i] == '"' {
			bs := 0
			for j := i - 1; j >= 0 && obj[j] == '\\'; j-- {
				bs++
			}
			if bs%2 == 0 {
				break
			}
		}
	}
	keyStart := i
	if after := skipWS(obj, end); after < len(obj) && obj[after] == ',' {
		return obj[keyStart:skipWS(obj, after+1)]
	}
	j := keyStart - 1
	for j > 0 && (obj[j] == ' ' || obj[j] == '\t' || obj[j] == '\n' || obj[j] == '\r') {
		j--
	}
	if obj[j] == ',' {
		return obj[j:end]
	}
	return obj[keyStart:end] // the only member
}
