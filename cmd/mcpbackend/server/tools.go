package server

import (
	"strconv"
	"time"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/router"
)

// callTool answers tools/call. Unknown tools are a protocol error (-32602); bad
// arguments are a tool error (isError), as the 2025-11-25 revision asks, so that a model
// can correct itself.
func (s *Server) callTool(m *codec.Message, sess *Session, r Responder) {
	name := m.Name
	var nb [128]byte
	if m.Flags&codec.NameEscaped != 0 {
		dec, err := codec.Unquote(nb[:0], name)
		if err == nil {
			name = dec
		}
	}
	t := s.cat.toolByName[string(name)]
	if t == nil {
		if name == nil {
			replyError(r, m.ID, codec.CodeInvalidParams, "Invalid params: tools/call needs a tool name", nil)
			return
		}
		replyError(r, m.ID, codec.CodeInvalidParams, "Unknown tool: "+string(name), nil)
		return
	}
	args := member(m.Params, "arguments")
	switch t.kind {
	case toolEcho:
		s.echo(m, sess, r, args)
	case toolSleep:
		ms, ok := intArg(args, "ms", -1)
		if !ok || ms < 0 || time.Duration(ms)*time.Millisecond > s.cfg.MaxSleep {
			toolError(r, m.ID, "sleep needs an integer ms between 0 and "+strconv.FormatInt(s.cfg.MaxSleep.Milliseconds(), 10))
			return
		}
		s.startOp(m, sess, r, &op{kind: opSleep, steps: 1, interval: time.Duration(ms) * time.Millisecond})
	case toolPayload:
		n, ok := intArg(args, "bytes", -1)
		if !ok || n < 0 || n > int64(s.cfg.MaxPayload) {
			toolError(r, m.ID, "payload needs an integer bytes between 0 and "+strconv.Itoa(s.cfg.MaxPayload))
			return
		}
		s.payload(m, sess, r, int(n))
	case toolFail:
		msg, ok := stringValue(member(args, "message"))
		if !ok || msg == "" {
			msg = "failure requested"
		}
		toolError(r, m.ID, msg)
	case toolFailRPC:
		msg, ok := stringValue(member(args, "message"))
		if !ok || msg == "" {
			msg = "failure requested"
		}
		code, ok := intArg(args, "code", codec.CodeInternalError)
		if !ok || code != int64(int32(code)) {
			code = codec.CodeInternalError
		}
		replyError(r, m.ID, int(code), msg, urlElicitationData(code, member(args, "url")))
	case toolProgress:
		steps, ok1 := intArg(args, "steps", 5)
		interval, ok2 := intArg(args, "intervalMs", 10)
		if !ok1 || !ok2 || steps < 1 || steps > int64(s.cfg.MaxSteps) || interval < 0 ||
			time.Duration(steps*interval)*time.Millisecond > s.cfg.MaxSleep {
			toolError(r, m.ID, "progress needs steps between 1 and "+strconv.Itoa(s.cfg.MaxSteps)+
				" and intervalMs >= 0, within "+s.cfg.MaxSleep.String()+" in all")
			return
		}
		s.startOp(m, sess, r, &op{kind: opProgress, steps: int(steps), interval: time.Duration(interval) * time.Millisecond})
	case toolSample:
		s.sample(m, sess, r, args)
	case toolTouch:
		s.touch(m, sess, r, args)
	case toolLog:
		s.logTool(m, sess, r, args)
	default:
		s.callFault(m, sess, r, args, t.kind)
	}
}

// intArg reads an integer argument, def when absent (required ones pass an out-of-range
// def, which the caller's range check refuses); ok is false when present but not an
// integer.
func intArg(args []byte, name string, def int64) (int64, bool) {
	raw := member(args, name)
	if raw == nil {
		return def, true
	}
	return intValue(raw)
}

// echo is the hot path: the text token goes from the request to the response verbatim,
// already quoted and escaped, with no decoding and no tree.
func (s *Server) echo(m *codec.Message, sess *Session, r Responder, args []byte) {
	tok := member(args, "text")
	if !isString(tok) {
		toolError(r, m.ID, "echo needs a string argument text")
		return
	}
	bp := getBuf()
	b := beginResult(*bp, m.ID)
	b = append(b, `{"content":`...)
	b = appendTextContent(b, tok)
	if sess.era >= era20250618 {
		b = append(b, `,"structuredContent":{"text":`...)
		b = append(b, tok...)
		b = append(b, '}')
	}
	b = append(b, `}}`...)
	r.Reply(b)
	*bp = b
	putBuf(bp)
}

// payloadAlphabet fills payloads: JSON-safe bytes, so the text needs no escaping.
const payloadAlphabet = "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ-_"

func (s *Server) payload(m *codec.Message, sess *Session, r Responder, n int) {
	bp := getBuf()
	b := beginResult(*bp, m.ID)
	b = append(b, `{"content":[{"type":"text","text":"`...)
	b = appendPayload(b, n)
	b = append(b, `"}]`...)
	if sess.era >= era20250618 {
		b = append(b, `,"structuredContent":{"bytes":`...)
		b = appendInt(b, int64(n))
		b = append(b, '}')
	}
	b = append(b, `}}`...)
	r.Reply(b)
	*bp = b
	putBuf(bp)
}

func appendPayload(dst []byte, n int) []byte {
	for n > 0 {
		k := min(n, len(payloadAlphabet))
		dst = append(dst, payloadAlphabet[:k]...)
		n -= k
	}
	return dst
}

// toolError answers with a tool execution error: a result with isError set.
func toolError(r Responder, id []byte, msg string) {
	bp := getBuf()
	b := beginResult(*bp, id)
	b = append(b, `{"content":[{"type":"text","text":`...)
	b = codec.AppendString(b, msg)
	b = append(b, `}],"isError":true}}`...)
	r.Reply(b)
	*bp = b
	putBuf(bp)
}

// toolText answers with a text result, and for 2025-06-18 sessions the structured
// content given as raw JSON (nil for none).
func toolText(r Responder, sess *Session, id []byte, text string, structured []byte) {
	bp := getBuf()
	b := beginResult(*bp, id)
	b = append(b, `{"content":[{"type":"text","text":`...)
	b = codec.AppendString(b, text)
	b = append(b, `}]`...)
	if structured != nil && sess.era >= era20250618 {
		b = append(b, `,"structuredContent":`...)
		b = append(b, structured...)
	}
	b = append(b, `}}`...)
	r.Reply(b)
	*bp = b
	putBuf(bp)
}

func (s *Server) logTool(m *codec.Message, sess *Session, r Responder, args []byte) {
	level := levelInfo
	if raw := member(args, "level"); raw != nil {
		name, ok := stringValue(raw)
		if level = levelIndex([]byte(name)); !ok || level < 0 {
			toolError(r, m.ID, "log: level must be one of debug, info, notice, warning, error, critical, alert, emergency")
			return
		}
	}
	msg, ok := stringValue(member(args, "message"))
	if !ok {
		toolError(r, m.ID, "log needs a string argument message")
		return
	}
	s.logTo(r, sess, level, msg)
	toolText(r, sess, m.ID, "logged at "+logLevels[level], nil)
}

func (s *Server) touch(m *codec.Message, sess *Session, r Responder, args []byte) {
	uri, ok := stringValue(member(args, "uri"))
	res := s.cat.resByURI[uri]
	if !ok || res == nil {
		toolError(r, m.ID, "touch needs the uri of a listed resource")
		return
	}
	v := s.changed(res)
	var sb [128]byte
	st := append(sb[:0], `{"uri":`...)
	st = codec.AppendString(st, uri)
	st = append(st, `,"version":`...)
	st = appendInt(st, int64(v))
	st = append(st, '}')
	toolText(r, sess, m.ID, "touched "+uri+", now version "+strconv.FormatUint(v, 10), st)
}

// overloaded answers a call refused by MaxInFlight.
func overloaded(r Responder, id []byte) {
	replyError(r, id, codec.CodeOverloaded, router.MessageOverloaded, []byte(`{"reason":"too many calls in flight"}`))
}

// urlElicitationData is the data of fail_rpc's error: for 2025-11-25's URL elicitation
// required (-32042) given a url argument (raw), the one URL-mode elicitation it lists,
// as a server that needs the user to open url writes it; nil otherwise.
func urlElicitationData(code int64, url []byte) []byte {
	if code != codec.CodeURLElicitationRequired {
		return nil
	}
	if _, ok := stringValue(url); !ok {
		return nil
	}
	data := append([]byte(`{"elicitations":[{"mode":"url","elicitationId":"fail_rpc","message":"Open the URL to continue","url":`), url...)
	return append(data, "}]}"...)
}
