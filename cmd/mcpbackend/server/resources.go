package server

import (
	"net/url"
	"strconv"
	"strings"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/router/modern"
)

// changed gives res a new version and tells its subscribers; it returns the version.
func (s *Server) changed(res *resource) uint64 {
	v := res.version.Add(1)
	s.notifyUpdated(res.uri)
	return v
}

// notifyUpdated sends notifications/resources/updated to every session subscribed to uri,
// on each session's own stream (it belongs to no request). The subscriber set is copied
// under the lock and the sends happen outside it.
func (s *Server) notifyUpdated(uri string) {
	s.subMu.Lock()
	set := s.subs[uri]
	if len(set) == 0 {
		s.subMu.Unlock()
		return
	}
	list := make([]*Session, 0, len(set))
	for sess := range set {
		list = append(list, sess)
	}
	s.subMu.Unlock()

	bp := getBuf()
	b := append(*bp, `{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":`...)
	b = codec.AppendString(b, uri)
	b = append(b, `}}`...)
	for _, sess := range list {
		msg := b
		if sess.listenID != nil { // a 2026-07-28 listen stream: tagged with its subscriptionId
			msg = appendUpdated(b[len(b):], sess.listenID, uri)
		}
		if out := sess.sender(); out != nil && out.Send(msg) == nil {
			s.Stats.Updates.Add(1)
		}
	}
	*bp = b
	putBuf(bp)
}

// uriOf returns params.uri, decoded when it was written with escapes.
func uriOf(m *codec.Message) (string, bool) {
	if m.URI == nil {
		return "", false
	}
	if m.Flags&codec.URIEscaped == 0 {
		return string(m.URI), true
	}
	dec, err := codec.Unquote(nil, m.URI)
	return string(dec), err == nil
}

// resourceNotFound answers for a URI nobody serves: -32002 in the 2025 revisions,
// -32602 in 2026-07-28, which renumbered it (and forbids -32002).
func resourceNotFound(r Responder, sess *Session, id []byte, uri string) {
	data := append([]byte(`{"uri":`), codec.AppendString(nil, uri)...)
	data = append(data, '}')
	code, _ := modern.ErrorToModern(codec.CodeResourceNotFound)
	if !sess.modern {
		code = codec.CodeResourceNotFound
	}
	replyError(r, id, code, "Resource not found", data)
}

func (s *Server) subscribe(m *codec.Message, sess *Session, r Responder, on bool) {
	uri, ok := uriOf(m)
	if !ok {
		replyError(r, m.ID, codec.CodeInvalidParams, "Invalid params: uri is required", nil)
		return
	}
	res := s.cat.resByURI[uri]
	if res == nil {
		resourceNotFound(r, sess, m.ID, uri)
		return
	}
	// sess.mu is held across the update of the server's set so that a session closing
	// concurrently either sees this subscription and removes it, or refuses it here.
	sess.mu.Lock()
	if !sess.closed {
		s.subMu.Lock()
		set := s.subs[uri]
		if on {
			if set == nil {
				set = make(map[*Session]struct{})
				s.subs[uri] = set
			}
			set[sess] = struct{}{}
			if sess.subs == nil {
				sess.subs = make(map[string]*resource)
			}
			sess.subs[uri] = res
		} else {
			delete(set, sess)
			if len(set) == 0 {
				delete(s.subs, uri)
			}
			delete(sess.subs, uri)
		}
		s.subMu.Unlock()
	}
	sess.mu.Unlock()
	replyResult(r, m.ID, emptyObject)
}

// readResource answers resources/read for listed resources and the two templates.
func (s *Server) readResource(m *codec.Message, sess *Session, r Responder) {
	uri, ok := uriOf(m)
	if !ok {
		replyError(r, m.ID, codec.CodeInvalidParams, "Invalid params: uri is required", nil)
		return
	}
	var text string
	mime := "text/plain"
	big := -1 // bytes://{n}: written straight into the reply
	switch res := s.cat.resByURI[uri]; {
	case res != nil && res.kind == resStats:
		text, mime = s.statsJSON(), res.mime
	case res != nil:
		text = res.text()
	case strings.HasPrefix(uri, "echo://"):
		t, err := url.PathUnescape(uri[len("echo://"):])
		if err != nil {
			replyError(r, m.ID, codec.CodeInvalidParams, "Invalid params: bad escape in "+uri, nil)
			return
		}
		text = t
	case strings.HasPrefix(uri, "bytes://"):
		n, ok := intValue([]byte(uri[len("bytes://"):]))
		if !ok || n < 0 || n > int64(s.cfg.MaxPayload) {
			resourceNotFound(r, sess, m.ID, uri)
			return
		}
		big = int(n)
	default:
		resourceNotFound(r, sess, m.ID, uri)
		return
	}
	bp := getBuf()
	b := beginResult(*bp, m.ID)
	b = append(b, `{"contents":[{"uri":`...)
	b = codec.AppendString(b, uri)
	b = append(b, `,"mimeType":`...)
	b = codec.AppendString(b, mime)
	b = append(b, `,"text":`...)
	if big >= 0 {
		b = append(b, '"')
		b = appendPayload(b, big)
		b = append(b, '"')
	} else {
		b = codec.AppendString(b, text)
	}
	b = append(b, `}]}}`...)
	r.Reply(b)
	*bp = b
	putBuf(bp)
}

// statsJSON is the contents of stats://server.
func (s *Server) statsJSON() string {
	b := append([]byte(nil), `{"sessions":`...)
	b = appendInt(b, int64(s.reg.Len()))
	b = append(b, `,"inFlight":`...)
	b = appendInt(b, s.inflight.Load())
	for _, c := range []struct {
		name string
		v    uint64
	}{
		{"messages", s.Stats.Messages.Load()}, {"calls", s.Stats.Calls.Load()},
		{"cancelled", s.Stats.Cancelled.Load()}, {"overload", s.Stats.Overload.Load()},
		{"updates", s.Stats.Updates.Load()},
	} {
		b = append(b, `,"`...)
		b = append(b, c.name...)
		b = append(b, `":`...)
		b = strconv.AppendUint(b, c.v, 10)
	}
	return string(append(b, '}'))
}
