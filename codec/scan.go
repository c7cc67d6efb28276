package codec

import "encoding/binary"

// Object keys with their closing quote, as little-endian words, to match the routing
// keys with one load and compare; maskN keeps the first N bytes of a word.
const (
	kJSONRPC = 0x226370726e6f736a // jsonrpc"
	kID      = 0x0000000000226469 // id"
	kMethod  = 0x0022646f6874656d // method"
	kParams  = 0x0022736d61726170 // params"
	kResult  = 0x0022746c75736572 // result"
	kError   = 0x000022726f727265 // error"
	kName    = 0x00000022656d616e // name"
	kURI     = 0x0000000022697275 // uri"
	kMeta    = 0x0000226174656d5f // _meta"
	kCursor  = 0x0022726f73727563 // cursor"

	mask3 = 1<<24 - 1
	mask4 = 1<<32 - 1
	mask5 = 1<<40 - 1
	mask6 = 1<<48 - 1
	mask7 = 1<<56 - 1
)

// Envelope members, as bits of a "seen" set (duplicates are invalid requests).
const (
	fJSONRPC uint8 = 1 << iota
	fID
	fMethod
	fParams
	fResult
	fError
)

// memberKey is a member name the scanner looks for, with its bit.
type memberKey struct {
	name string
	bit  uint8
}

var (
	envelopeKeys = [...]memberKey{{"jsonrpc", fJSONRPC}, {"id", fID}, {"method", fMethod}, {"params", fParams}, {"result", fResult}, {"error", fError}}
	paramsKeys   = [...]memberKey{{"name", pName}, {"uri", pURI}, {"cursor", pCursor}, {"requestId", pRequestID}, {"_meta", pMeta}, {"progressToken", pProgressToken}, {"requestState", pRequestState}}
)

// member maps a key (string contents as sent) to its bit in keys, 0 for any other key:
// the general path, for keys the one-word match in envelope did not settle. A plain
// key is compared as a string, which checks the length first, so a key of another
// length costs one comparison; an escaped key ("\u0069d") is decoded on the fly, so
// that it cannot smuggle an "id" past the router.
func member(key []byte, escaped bool, keys []memberKey) uint8 {
	for _, k := range keys {
		if string(key) == k.name || escaped && equalUnescaped(key, k.name) {
			return k.bit
		}
	}
	return 0
}

// Routing members of params (and of params._meta).
const (
	pName uint8 = 1 << iota
	pURI
	pCursor
	pRequestID
	pMeta
	pProgressToken // params.progressToken, which notifications/progress carries
	// pRequestState is params.requestState, which only sets StateMember: it is read
	// (and may repeat) as any other member.
	pRequestState
)

// paramsMember is member for the routing members of params, written out as a switch
// because it is on the hot path: every tools/call reaches it with "arguments", which
// the one-word match does not know. A switch on string(key) neither allocates nor
// compares a key of the wrong length (the compiler searches on the length first), and
// costs less than member's loop: BenchmarkEnvelope/codec/call199 took 7% more CPU per
// message through member.
func paramsMember(key []byte, escaped bool) uint8 {
	if escaped {
		return member(key, true, paramsKeys[:])
	}
	switch string(key) {
	case "uri":
		return pURI
	case "name":
		return pName
	case "_meta":
		return pMeta
	case "cursor":
		return pCursor
	case "requestId":
		return pRequestID
	case "progressToken":
		return pProgressToken
	case "requestState":
		return pRequestState
	}
	return 0
}

// Scan scans one JSON-RPC 2.0 message (a JSON object, optionally surrounded by
// whitespace) and fills m with views into b. It validates the whole input: any RFC 8259
// violation, invalid UTF-8 or nesting deeper than MaxDepth is a parse error
// (CodeParseError); valid JSON that is not a valid JSON-RPC 2.0 message is an invalid
// request (CodeInvalidRequest). The returned error is then an *Error saying what and
// where.
//
// On an invalid request, m keeps what was recognised before and after the problem
// (Kind stays KindInvalid): notably m.ID, set when the id itself was valid, so that the
// error response can carry it as JSON-RPC asks. On a parse error, *m is zeroed.
//
// Scan does not allocate unless it returns an error. A batch (a JSON array) is an
// invalid request here; split it with SplitBatch first.
func Scan(b []byte, m *Message) error {
	*m = Message{}
	s := scanner{b: b}
	s.envelope(m)
	if s.perr {
		*m = Message{}
		return parseError(s.preason, s.poff)
	}
	if s.ereason != "" {
		m.Kind = KindInvalid
		return invalidError(s.ereason, s.eoff)
	}
	return nil
}

// envelope scans the message object, records errors in s and fills m.
//
// It is the codec's one hand-written member loop, kept because the profile needs it:
// every message takes this path, and the per-member cost is most of the time of a
// small request. It walks the message object, its params and params._meta as three
// levels of one loop (the level is also the nesting depth), matches the keys it
// routes on with one word load, and keeps its bookkeeping in memory (e), so that few
// values have to be saved around each call. BenchmarkEnvelope/codec/call199 (a
// tools/call with name, arguments and _meta) shows why: walking params and _meta with
// the open, member and after helpers instead cost about 25% there (7% on batch100),
// and the same single loop with its bookkeeping in locals about 7%. Objects off the
// hot path (the error object, list rewrites) use those helpers.
func (s *scanner) envelope(m *Message) {
	b := s.b
	i := ws(b, 0)
	if i >= len(b) || b[i] != '{' {
		s.notTop(reasonNotObject)
		return
	}
	e := seenMembers{start: i}

	var (
		level  = 1 // 1: the message object, 2: params, 3: params._meta
		ks, vs int // offsets of the current key and value
		f      uint8
		c      byte
		esc    bool
	)

open: // b[i] opens the object of level
	i = ws(b, i+1)
	if i >= len(b) {
		s.fail(reasonEOF, i)
		return
	}
	if b[i] == '}' {
		goto close
	}

member: // b[i] should start a key of the object of level
	if b[i] != '"' {
		s.fail(reasonExpectKey, i)
		return
	}
	ks = i
	// The routing keys, closing quote included, fit in one word: match them with a
	// load and a compare, which also validates them. The two switches (the message
	// object's keys, params') are the same shape on purpose: a loop over a table of
	// {word, mask, bit, length} for both cost 8% more CPU per message on
	// BenchmarkEnvelope/codec/call199 and 6% on batch100 (cpu-ns/op, best of 16
	// interleaved rounds), against constants the compiler folds into the compares.
	f = 0
	if i+9 <= len(b) {
		w := binary.LittleEndian.Uint64(b[i+1:])
		if level == 1 {
			switch {
			case w == kJSONRPC:
				f, i = fJSONRPC, i+9
			case w&mask7 == kMethod:
				f, i = fMethod, i+8
			case w&mask7 == kParams:
				f, i = fParams, i+8
			case w&mask7 == kResult:
				f, i = fResult, i+8
			case w&mask6 == kError:
				f, i = fError, i+7
			case w&mask3 == kID:
				f, i = fID, i+4
			}
		} else if level == 2 {
			switch {
			case w&mask5 == kName:
				f, i = pName, i+6
			case w&mask4 == kURI:
				f, i = pURI, i+5
			case w&mask6 == kMeta:
				f, i = pMeta, i+7
			case w&mask7 == kCursor:
				f, i = pCursor, i+8
			}
		}
	}
	if f == 0 {
		if j := strRun(b, i+1); j < len(b) && b[j] == '"' {
			i, esc = j+1, false
		} else if i, esc = s.strSlow(j, false); i < 0 {
			return
		}
		switch key := b[ks+1 : i-1]; level {
		case 1:
			f = member(key, esc, envelopeKeys[:])
		case 2:
			if f = paramsMember(key, esc); f == pRequestState {
				m.Flags |= StateMember
				f = 0
			}
		default:
			if rawEqual(key, esc, "progressToken") {
				f = pProgressToken // the only member of _meta the router reads
			}
			if esc || len(key) <= len(ReservedMetaPrefix) || string(key[:len(ReservedMetaPrefix)]) != ReservedMetaPrefix {
				e.metaOther = true // MetaReserved is not for this _meta
			}
			e.metaAny = true
		}
	}
	i = ws(b, i)
	if i >= len(b) || b[i] != ':' {
		if i >= len(b) {
			s.fail(reasonEOF, i)
		} else {
			s.fail(reasonExpectColon, i)
		}
		return
	}
	i = ws(b, i+1)
	if i >= len(b) {
		s.fail(reasonEOF, i)
		return
	}
	vs, c = i, b[i]
	switch level {
	case 1:
		dup := e.seen&f != 0
		if dup {
			s.invalid(reasonDupMember, ks)
		}
		e.seen |= f
		switch f {
		case fJSONRPC:
			if i+5 <= len(b) && string(b[i:i+5]) == `"2.0"` {
				i += 5
				break
			}
			if c != '"' {
				s.invalid(reasonBadJSONRPC, vs)
				i = s.value(i, 1)
				break
			}
			if i, esc = s.str(i); i >= 0 && !rawEqual(b[vs+1:i-1], esc, "2.0") {
				s.invalid(reasonBadJSONRPC, vs)
			}
		case fID:
			e.idOff = vs
			valid := false
			switch {
			case c == '"':
				i, _ = s.str(i)
				valid = true
			case c == '-' || c-'0' < 10:
				i, valid = s.num(i)
				if i >= 0 && !valid {
					s.invalid(reasonBadID, vs)
				}
			case c == 'n':
				i = s.literal(i)
				valid, e.idNull = true, true
			default:
				s.invalid(reasonBadID, vs)
				i = s.value(i, 1)
			}
			if dup {
				m.ID = nil // ambiguous: answer to neither
			} else if i >= 0 && valid {
				m.ID = b[vs:i]
			}
		case fMethod:
			if c != '"' {
				s.invalid(reasonBadMethod, vs)
				i = s.value(i, 1)
				break
			}
			if i, esc = s.str(i); i >= 0 {
				m.Method = b[vs+1 : i-1]
				if esc {
					m.Flags |= MethodEscaped
				}
			}
		case fParams:
			e.parOff = vs
			switch c {
			case '{':
				level, e.pseen = 2, 0
				goto open // m.Params is set where it closes
			case '[':
				i = s.container(i, 1)
			default:
				s.invalid(reasonBadParams, vs)
				i = s.value(i, 1)
			}
			if i >= 0 {
				m.Params = b[vs:i]
			}
		case fResult:
			if i = s.value(i, 1); i >= 0 {
				m.Result = b[vs:i]
			}
		case fError:
			if c == '{' {
				i = s.errorObject(i)
			} else {
				s.invalid(reasonBadError, vs)
				i = s.value(i, 1)
			}
			if i >= 0 {
				m.Error = b[vs:i]
			}
		default:
			i = s.value(i, 1)
		}
	case 2:
		if e.pseen&f != 0 {
			s.invalid(reasonDupParam, ks)
		}
		e.pseen |= f
		switch f {
		case pName, pURI, pCursor:
			if c != '"' {
				i = s.value(i, 2)
				break
			}
			if i, esc = s.str(i); i < 0 {
				break
			}
			v := b[vs+1 : i-1]
			switch f {
			case pName:
				m.Name = v
				if esc {
					m.Flags |= NameEscaped
				}
			case pURI:
				m.URI = v
				if esc {
					m.Flags |= URIEscaped
				}
			default:
				m.Cursor = v
				if esc {
					m.Flags |= CursorEscaped
				}
			}
		case pRequestID:
			var tok bool
			if i, tok = s.token(i, 2); i >= 0 && tok {
				m.RequestID = b[vs:i]
			}
		case pProgressToken:
			var tok bool
			if i, tok = s.token(i, 2); i >= 0 && tok && m.ProgressToken == nil {
				m.ProgressToken = b[vs:i]
			}
		case pMeta:
			if c == '{' {
				level, e.mseen, e.metaOff = 3, 0, vs
				e.metaAny, e.metaOther = false, false
				goto open // m.Meta is set where it closes
			}
			i = s.value(i, 2)
		default:
			if c == '{' || c == '[' {
				i = s.container(i, 2) // the arguments, usually
			} else {
				i = s.value(i, 2)
			}
		}
	default:
		if f == 0 {
			i = s.value(i, 3)
			break
		}
		if e.mseen != 0 {
			s.invalid(reasonDupParam, ks)
		}
		e.mseen = f
		var tok bool
		if i, tok = s.token(i, 3); i >= 0 && tok {
			m.ProgressToken = b[vs:i] // _meta's token wins over params.progressToken
		}
	}
	if i < 0 {
		return
	}

next: // after a value: a comma and the next member, or the end of the object of level
	i = ws(b, i)
	if i >= len(b) {
		s.fail(reasonEOF, i)
		return
	}
	if c = b[i]; c == ',' {
		i = ws(b, i+1)
		if i >= len(b) {
			s.fail(reasonEOF, i)
			return
		}
		goto member
	}
	if c != '}' {
		s.fail(reasonExpectComma, i)
		return
	}

close: // b[i] closes the object of level
	i++
	switch level {
	case 3:
		level = 2
		m.Meta = b[e.metaOff:i]
		if m.Flags &^= MetaReserved; e.metaAny && !e.metaOther {
			m.Flags |= MetaReserved
		}
		goto next
	case 2:
		level = 1
		m.Params = b[e.parOff:i]
		goto next
	}
	if i = ws(b, i); i != len(b) {
		s.fail(reasonTrailing, i)
		return
	}

	// The bytes are valid JSON; now the JSON-RPC shape (written here rather than in a
	// function of its own: the call showed as 1.5% of call199).
	if e.seen&fJSONRPC == 0 {
		s.invalid(reasonNoJSONRPC, e.start)
	}
	switch {
	case e.seen&fMethod != 0:
		if e.seen&(fResult|fError) != 0 {
			s.invalid(reasonMethodAndResp, e.start)
		}
		if e.seen&fID == 0 {
			m.Kind = KindNotification
		} else {
			if e.idNull {
				s.invalid(reasonNullID, e.idOff)
			}
			m.Kind = KindRequest
		}
	case e.seen&(fResult|fError) == fResult|fError:
		s.invalid(reasonBothResErr, e.start)
	case e.seen&(fResult|fError) != 0:
		switch {
		case e.seen&fID == 0:
			s.invalid(reasonNoID, e.start)
		case e.idNull && e.seen&fResult != 0:
			s.invalid(reasonNullID, e.idOff)
		}
		if e.seen&fParams != 0 {
			s.invalid(reasonParamsInResp, e.parOff)
		}
		if e.seen&fResult != 0 {
			m.Kind = KindResult
		} else {
			m.Kind = KindError
		}
	default:
		s.invalid(reasonNoKind, e.start)
	}
}

// seenMembers is what envelope saw of the message object, for the JSON-RPC shape
// checks. Having more than four fields, it stays in memory rather than in registers,
// which saves envelope from saving them around each call it makes.
type seenMembers struct {
	seen                 uint8 // fJSONRPC...
	pseen, mseen         uint8 // members of params (pName...) and _meta (pProgressToken)
	idNull               bool  // "id": null
	start, idOff, parOff int   // offsets of the object, the id and params
	metaOff              int   // offset of params._meta
	// metaAny: _meta has a member; metaOther: one whose key is not under
	// ReservedMetaPrefix (MetaReserved).
	metaAny, metaOther bool
}

// token scans the value at b[i] (inside depth open containers) and returns the index
// after it, and whether it is a string or a number: the types a progress token or a
// request id may have. Other values are validated and reported as not a token.
func (s *scanner) token(i, depth int) (int, bool) {
	switch c := s.b[i]; {
	case c == '"':
		i, _ = s.str(i)
		return i, true
	case c == '-' || c-'0' < 10:
		i, _ = s.num(i)
		return i, true
	}
	return s.value(i, depth), false
}

// errorObject scans the error member's object at b[i] (depth 2) and checks that it has
// an integer "code" and a string "message", each once.
func (s *scanner) errorObject(i int) int {
	b := s.b
	start := i
	var haveCode, haveMsg, bad bool
	i, done := s.open(i, '}')
	for !done {
		key, esc, v := s.member(i)
		if v < 0 {
			return -1
		}
		switch c := b[v]; {
		case rawEqual(key, esc, "code"):
			bad = bad || haveCode
			haveCode = true
			if c == '-' || c-'0' < 10 {
				var integer bool
				i, integer = s.num(v)
				bad = bad || !integer
			} else {
				bad = true
				i = s.value(v, 2)
			}
		case rawEqual(key, esc, "message"):
			bad = bad || haveMsg || c != '"'
			haveMsg = true
			i = s.value(v, 2)
		default:
			i = s.value(v, 2)
		}
		if i < 0 {
			return -1
		}
		i, done = s.after(i, '}')
	}
	if i >= 0 && (bad || !haveCode || !haveMsg) {
		s.invalid(reasonBadError, start)
	}
	return i
}
