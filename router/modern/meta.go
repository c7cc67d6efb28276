package modern

import "github.com/mcprouter/mcprouter/codec"

// Meta is the per-request _meta of a 2026-07-28 request: views into the scanned message
// (zero copies), valid as long as the message bytes are. A nil view means the key was
// absent (or, for the string-valued ones, present with another type: Check then reports
// it as missing, which is what it is for a server).
type Meta struct {
	// Present is true when params._meta is an object.
	Present bool
	// Version is the contents of io.modelcontextprotocol/protocolVersion (escapes intact).
	Version []byte
	// Capabilities is the raw io.modelcontextprotocol/clientCapabilities object.
	Capabilities []byte
	// ClientInfo is the raw io.modelcontextprotocol/clientInfo value (optional).
	ClientInfo []byte
	// LogLevel is the contents of io.modelcontextprotocol/logLevel (optional): the
	// server sends notifications/message for this request only when it is set.
	LogLevel []byte
	// Caps is Capabilities read into flags (the ones the router acts on).
	Caps Capability

	// versionSeen and capsSeen tell a present key of the wrong type from an absent
	// one, for the error message.
	versionSeen, capsSeen bool
}

// ReadMeta reads params._meta of a request (params is codec.Message.Params) into m. It
// walks params once, entering _meta and the capabilities object in place rather than
// finding them first and walking them again (a request's bytes are passed over once
// more, not three times), and allocates nothing.
func ReadMeta(params []byte, m *Meta) {
	*m = Meta{}
	var w codec.Walker
	if !w.Object(params) {
		return
	}
	for k, esc, ok := w.Key(); ok; k, esc, ok = w.Key() {
		if !keyIs(k, esc, "_meta") {
			if _, ok := w.Value(); !ok {
				return
			}
			continue
		}
		var mw codec.Walker
		if w.Peek() != '{' || !w.Enter(&mw) {
			return
		}
		m.Present = true
		readMetaMembers(&mw, m)
		return
	}
}

// ReadMetaOf reads the _meta of a scanned request into m, as ReadMeta does from its
// params, from the object codec.Scan recorded (codec.Message.Meta): only _meta is walked,
// not the arguments before it, which on a tools/call are most of the request.
func ReadMetaOf(msg *codec.Message, m *Meta) {
	*m = Meta{}
	if msg.Meta == nil {
		return
	}
	var w codec.Walker
	if !w.Object(msg.Meta) {
		return
	}
	m.Present = true
	readMetaMembers(&w, m)
}

// readMetaMembers reads the members of _meta, on w, into m.
func readMetaMembers(w *codec.Walker, m *Meta) {
	for k, esc, ok := w.Key(); ok; k, esc, ok = w.Key() {
		if keyIs(k, esc, KeyClientCapabilities) {
			m.capsSeen = true
			if w.Peek() == '{' {
				var cw codec.Walker
				w.Enter(&cw)
				caps := readCapabilities(&cw)
				v, ok := w.Exit(&cw)
				if !ok {
					return
				}
				m.Capabilities, m.Caps = v, caps
				continue
			}
			// Not an object: no capabilities, as for a missing key.
		}
		v, ok := w.Value()
		if !ok {
			return
		}
		switch {
		case keyIs(k, esc, KeyProtocolVersion):
			m.versionSeen = true
			if s, ok := stringContents(v); ok {
				m.Version = s
			}
		case keyIs(k, esc, KeyClientInfo):
			m.ClientInfo = v
		case keyIs(k, esc, KeyLogLevel):
			if s, ok := stringContents(v); ok {
				m.LogLevel = s
			}
		}
	}
}

// Claimed reports whether the request claims the modern era: its _meta carries a
// protocol version (of any value: an unknown one is then answered -32022, not taken for
// a legacy request), or the MCP-Protocol-Version header names 2026-07-28 or later. A
// dual-era endpoint serves a claimed request statelessly and anything else the 2025 way.
func (m *Meta) Claimed(header []byte) bool {
	return m.versionSeen || IsModernVersion(header)
}

// Capability is a set of client capabilities, as flags.
type Capability uint8

const (
	CapRoots Capability = 1 << iota
	CapSampling
	CapElicitation
	CapTasks // the io.modelcontextprotocol/tasks extension
)

// capNames are the capability object keys, in flag order.
var capNames = [...]string{"roots", "sampling", "elicitation"}

// TasksExtension is the identifier of the tasks extension in capabilities.extensions.
const TasksExtension = "io.modelcontextprotocol/tasks"

// ReadCapabilities reads the flags of a raw ClientCapabilities object.
func ReadCapabilities(raw []byte) Capability {
	var w codec.Walker
	if !w.Object(raw) {
		return 0
	}
	return readCapabilities(&w)
}

// readCapabilities reads the flags of the capabilities object on w, to its end.
func readCapabilities(w *codec.Walker) Capability {
	var c Capability
next:
	for k, esc, v, ok := w.Next(); ok; k, esc, v, ok = w.Next() {
		if !isObject(v) {
			continue
		}
		for i, n := range capNames {
			if keyIs(k, esc, n) {
				c |= 1 << i
				continue next
			}
		}
		if keyIs(k, esc, "extensions") && isObject(codec.Member(v, TasksExtension)) {
			c |= CapTasks
		}
	}
	return c
}

// AppendCapabilities appends c as a ClientCapabilities object, {"sampling":{}} and so
// on: the shape of data.requiredCapabilities in -32021 and of the capabilities the
// router declares upstream.
func AppendCapabilities(dst []byte, c Capability) []byte {
	dst = append(dst, '{')
	first := true
	for i, n := range capNames {
		if c&(1<<i) == 0 {
			continue
		}
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = append(dst, '"')
		dst = append(dst, n...)
		dst = append(dst, `":{}`...)
	}
	if c&CapTasks != 0 {
		if !first {
			dst = append(dst, ',')
		}
		dst = append(dst, `"extensions":{"`+TasksExtension+`":{}}`...)
	}
	return append(dst, '}')
}

// Log levels in order of severity (RFC 5424, as in LoggingLevel).
var logLevels = [...]string{"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"}

// MessageLevel returns the contents of a notifications/message's params.level, nil
// when it has none or it is not a string.
func MessageLevel(params []byte) []byte {
	if v := codec.Member(params, "level"); len(v) >= 2 && v[0] == '"' {
		return v[1 : len(v)-1]
	}
	return nil
}

// LogLevelIndex returns the severity index of a level name (0 = debug), or -1 for a
// level that does not exist. A request without a log level gets no log messages at all:
// callers test len(Meta.LogLevel) first.
func LogLevelIndex(name []byte) int {
	for i, l := range logLevels {
		if l == string(name) {
			return i
		}
	}
	return -1
}
