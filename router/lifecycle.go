package router

import (
	"bytes"
	"errors"
	"slices"
	"strconv"

	"github.com/bytedance/sonic"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/router/modern"
	"github.com/mcprouter/mcprouter/router/params"
	"github.com/mcprouter/mcprouter/transport"
)

// logLevels are the syslog severities of logging/setLevel, least severe first.
var logLevels = []string{"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"}

// handle answers what the router answers itself and reports whether it did; false sends
// the exchange to the fleet's Run.
func (r *Router) handle(j *job) bool {
	x := j.x
	if x.Stateless {
		return r.handleStateless(j)
	}
	m := &x.Msg
	method := m.Method
	if m.Flags&codec.MethodEscaped != 0 {
		// Rare: a method name written with escapes. Decode it once for comparison.
		var err error
		if method, err = codec.Unquote(nil, m.Method); err != nil {
			method = m.Method
		}
	}
	if m.Kind == codec.KindRequest || m.Kind == codec.KindNotification {
		rev := Latest // no session yet: initialize, ping, or a request refused below
		if j.s != nil {
			rev = j.s.Version()
		}
		if j.refuseParams(rev, method) {
			return true
		}
	}
	switch m.Kind {
	case codec.KindNotification:
		return r.notification(j, string(method))
	case codec.KindResult, codec.KindError:
		// A client's answer to a server-to-client request: only the fleet made those.
		if r.fleet != nil && j.s != nil {
			return !r.fleet.Prepare(j.s, x)
		}
		j.done()
		return true
	}

	switch string(method) {
	case "initialize":
		r.initialize(j)
		return true
	case "ping":
		j.reply(emptyObject)
		return true
	case "server/discover":
		// Without the 2026-07-28 _meta or header it is not that revision's request
		// (stateless.go serves those): -32601, as a 2025 server answers it, makes a
		// client fall back to initialize.
		j.replyError(codec.CodeMethodNotFound, "Method not found: server/discover is a 2026-07-28 request; send it with _meta."+modern.KeyProtocolVersion+" and "+modern.KeyClientCapabilities+", or initialize a session", nil)
		return true
	}
	if j.s == nil {
		// JSON-RPC's invalid request: the message is fine, the session is not ready for it.
		j.replyError(codec.CodeInvalidRequest, "session not initialized: send initialize first", nil)
		return true
	}
	switch string(method) {
	case "shutdown":
		// From the seed documents: answer {} and end the session once the answer is out.
		t := j.s.TransportSession()
		j.reply(emptyObject)
		if t != nil {
			go t.Close()
		}
		return true
	case "logging/setLevel":
		r.setLevel(j)
		return true
	}
	if r.fleet != nil {
		return !r.fleet.Prepare(j.s, x)
	}
	j.replyError(codec.CodeMethodNotFound, "Method not found", nil)
	return true
}

var emptyObject = []byte("{}")

// refuseParams checks the params of j's request or notification against the schema of
// revision rev before anything answers or routes it, and reports whether they were
// refused: a request gets -32602 naming the member (not a routing error such as "Unknown
// tool" for a missing name), a notification is dropped, as nothing answers one. It does
// not allocate when the params conform.
func (j *job) refuseParams(rev string, method []byte) bool {
	m := &j.x.Msg
	err := params.Validate(rev, method, m.Params)
	if err == nil {
		return false
	}
	if m.Kind != codec.KindRequest {
		j.done()
		return true
	}
	var e *params.Error
	if !errors.As(err, &e) {
		j.replyError(codec.CodeInvalidParams, "Invalid params: "+err.Error(), nil)
		return true
	}
	j.replyError(e.Code(), e.Error(), e.AppendData(nil))
	return true
}

func (r *Router) notification(j *job, method string) bool {
	switch method {
	case "notifications/initialized":
		if j.s != nil {
			if t := j.s.TransportSession(); t != nil {
				t.MarkReady() // no longer subject to the transport's handshake timeout
			}
		}
		j.done()
		return true
	}
	if r.fleet != nil && j.s != nil {
		return !r.fleet.Prepare(j.s, j.x)
	}
	j.done()
	return true
}

// initializeParams are initialize's params as views of the request's bytes (raw JSON
// values, nil when absent): read in place with the codec's Walker, where a decoder into
// a struct copied capabilities and clientInfo only for keepClient to copy or share them
// again (1.7% of a router's CPU while sessions open, bench/RESULTS.md, OPEN2).
type initializeParams struct {
	protocolVersion, capabilities, clientInfo []byte
}

// parseInitialize reads initialize's params; false when they are not a well-formed
// object. A member given twice counts at its last, as a decoder would have it.
func parseInitialize(raw []byte) (p initializeParams, ok bool) {
	var w codec.Walker
	if !w.Object(raw) {
		return p, false
	}
	for k, _, v, more := w.Next(); more; k, _, v, more = w.Next() {
		switch {
		case codec.KeyIs(k, "protocolVersion"):
			p.protocolVersion = v
		case codec.KeyIs(k, "capabilities"):
			p.capabilities = v
		case codec.KeyIs(k, "clientInfo"):
			p.clientInfo = v
		}
	}
	return p, w.Err() == nil
}

// version is the protocolVersion asked for; present false when absent or null, ok
// false when it is not a string.
func (p *initializeParams) version() (v string, present, ok bool) {
	raw := p.protocolVersion
	switch {
	case raw == nil || string(raw) == "null":
		return "", false, true
	case len(raw) < 2 || raw[0] != '"':
		return "", false, false
	}
	c := raw[1 : len(raw)-1] // a valid string: the Walker checked it
	if bytes.IndexByte(c, '\\') < 0 {
		return string(c), true, true
	}
	dec, err := codec.Unquote(nil, c)
	return string(dec), true, err == nil
}

func (r *Router) initialize(j *job) {
	x := j.x
	if j.s != nil || (x.Session != nil && x.Session.State() != nil) {
		j.replyError(codec.CodeInvalidRequest, "session already initialized: initialize may be sent once per session", nil)
		return
	}
	p, ok := parseInitialize(x.Msg.Params)
	requested, present, isString := p.version()
	if !ok || !isString {
		j.replyError(codec.CodeInvalidParams, "Invalid params: initialize needs protocolVersion, capabilities and clientInfo", nil)
		return
	}
	if !present || !validVersionSyntax(requested) {
		data := append([]byte(nil), `{"supported":[`...)
		for i, v := range Versions {
			if i > 0 {
				data = append(data, ',')
			}
			data = codec.AppendString(data, v)
		}
		data = append(data, `],"requested":`...)
		data = codec.AppendString(data, requested)
		data = append(data, '}')
		j.replyError(codec.CodeInvalidParams, "Unsupported protocol version", data)
		return
	}
	if msg := oversized(p.capabilities, p.clientInfo); msg != "" {
		j.replyError(codec.CodeInvalidParams, msg, nil)
		return
	}
	version := Negotiate(requested)
	s := &Session{version: version, r: r}
	s.keepClient(p.capabilities, p.clientInfo)
	ts, err := x.Bind(version, s)
	if err != nil {
		j.replyError(codec.CodeInvalidRequest, bindRefusal(err), nil)
		return
	}
	if !ts.Account().TryReserve(s.recordBytes()) {
		ts.Close()
		j.replyError(codec.CodeInvalidRequest, "cannot open session: the router's memory budget for sessions is exhausted; retry later", nil)
		return
	}
	s.t.Store(ts)
	r.Stats.Initialized.Add(1)
	if r.fleet != nil {
		r.fleet.SessionOpened(s)
	}
	s.Persist()

	res := append(j.buf[:0], `{"protocolVersion":`...)
	res = codec.AppendString(res, version)
	res = append(res, `,"capabilities":{"logging":{}`...)
	if r.fleet != nil {
		res = r.fleet.AppendCapabilities(res, version)
	}
	res = append(res, `},"serverInfo":{"name":`...)
	res = codec.AppendString(res, r.cfg.Name)
	res = append(res, `,"version":`...)
	res = codec.AppendString(res, r.cfg.Version)
	res = append(res, '}')
	if r.cfg.Instructions != "" {
		res = append(res, `,"instructions":`...)
		res = codec.AppendString(res, r.cfg.Instructions)
	}
	res = append(res, '}')
	// res lives in j.buf's storage; the reply is built in a fresh buffer.
	j.buf = nil
	j.reply(res)
}

// MaxClientField bounds the capabilities and the clientInfo of initialize, each: they
// are kept for the session's life (and in its record), so their size is the client's
// to choose only within reason.
const MaxClientField = 64 << 10

// oversized is the error message for capabilities or clientInfo beyond MaxClientField,
// "" when both fit.
func oversized(caps, info []byte) string {
	for _, f := range []struct {
		name string
		v    []byte
	}{{"capabilities", caps}, {"clientInfo", info}} {
		if len(f.v) > MaxClientField {
			return "Invalid params: " + f.name + " is " + strconv.Itoa(len(f.v)) + " bytes, at most " +
				strconv.Itoa(MaxClientField) + " (64 KiB) allowed"
		}
	}
	return ""
}

// bindRefusal is the message of a session the transport would not open.
func bindRefusal(err error) string {
	switch {
	case errors.Is(err, transport.ErrClientQuota):
		return "cannot open session: too many sessions from this address, all of them busy; end some (DELETE) or retry later"
	case errors.Is(err, transport.ErrTooManySessions):
		return "cannot open session: too many sessions (the router is at its session limit); retry later"
	}
	return "cannot open session: " + err.Error()
}

func (r *Router) setLevel(j *job) {
	var p struct {
		Level string `json:"level"`
	}
	if len(j.x.Msg.Params) == 0 || sonic.Unmarshal(j.x.Msg.Params, &p) != nil {
		j.replyError(codec.CodeInvalidParams, "Invalid params: logging/setLevel needs a level", nil)
		return
	}
	if slices.Contains(logLevels, p.Level) {
		if r.fleet != nil {
			r.fleet.SetLogLevel(j.s, p.Level)
		}
		j.reply(emptyObject)
		return
	}
	j.replyError(codec.CodeInvalidParams, "Invalid params: unknown log level "+p.Level, nil)
}
