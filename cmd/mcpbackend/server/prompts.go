package server

import (
	"strings"

	"github.com/mcprouter/mcprouter/codec"
)

func (s *Server) getPrompt(m *codec.Message, r Responder) {
	name := string(m.Name)
	if m.Flags&codec.NameEscaped != 0 {
		dec, _ := codec.Unquote(nil, m.Name)
		name = string(dec)
	}
	p := s.cat.promptBy[name]
	if p == nil {
		replyError(r, m.ID, codec.CodeInvalidParams, "Invalid params: unknown prompt "+name, nil)
		return
	}
	args := member(m.Params, "arguments")
	values := make(map[string]string, len(p.args))
	for _, a := range p.args {
		raw := member(args, a.name)
		if raw == nil {
			if a.required {
				replyError(r, m.ID, codec.CodeInvalidParams, "Invalid params: prompt "+name+" needs argument "+a.name, nil)
				return
			}
			continue
		}
		v, ok := stringValue(raw)
		if !ok {
			replyError(r, m.ID, codec.CodeInvalidParams, "Invalid params: argument "+a.name+" must be a string", nil)
			return
		}
		values[a.name] = v
	}
	bp := getBuf()
	b := beginResult(*bp, m.ID)
	b = append(b, `{"description":`...)
	b = codec.AppendString(b, p.description)
	b = append(b, `,"messages":[{"role":"user","content":{"type":"text","text":`...)
	b = codec.AppendString(b, p.render(values))
	b = append(b, `}}]}}`...)
	r.Reply(b)
	*bp = b
	putBuf(bp)
}

// maxCompletions is the most values a completion result may hold (the spec's limit).
const maxCompletions = 100

// complete answers completion/complete for prompt arguments and resource template
// arguments: the candidates starting with the typed value, case-insensitively.
func (s *Server) complete(m *codec.Message, r Responder) {
	ref := member(m.Params, "ref")
	typ, _ := stringValue(member(ref, "type"))
	argName, ok1 := stringValue(path(m.Params, "argument", "name"))
	value, ok2 := stringValue(path(m.Params, "argument", "value"))
	if !ok1 || !ok2 {
		replyError(r, m.ID, codec.CodeInvalidParams, "Invalid params: argument.name and argument.value are required", nil)
		return
	}
	var candidates []string
	switch typ {
	case "ref/prompt":
		name, _ := stringValue(member(ref, "name"))
		p := s.cat.promptBy[name]
		if p == nil {
			replyError(r, m.ID, codec.CodeInvalidParams, "Invalid params: unknown prompt "+name, nil)
			return
		}
		for _, a := range p.args {
			if a.name == argName {
				candidates = a.values
			}
		}
	case "ref/resource":
		uri, _ := stringValue(member(ref, "uri"))
		args, known := s.cat.templateArgs[uri]
		if !known {
			replyError(r, m.ID, codec.CodeInvalidParams, "Invalid params: unknown resource template "+uri, nil)
			return
		}
		candidates = args[argName]
	default:
		replyError(r, m.ID, codec.CodeInvalidParams, "Invalid params: ref.type must be ref/prompt or ref/resource", nil)
		return
	}
	bp := getBuf()
	b := beginResult(*bp, m.ID)
	b = append(b, `{"completion":{"values":[`...)
	n := 0
	for _, c := range candidates {
		if len(c) >= len(value) && strings.EqualFold(c[:len(value)], value) && n < maxCompletions {
			if n > 0 {
				b = append(b, ',')
			}
			b = codec.AppendString(b, c)
			n++
		}
	}
	b = append(b, `],"total":`...)
	b = appendInt(b, int64(n))
	b = append(b, `,"hasMore":false}}}`...)
	r.Reply(b)
	*bp = b
	putBuf(bp)
}
