package fleet

import (
	"strings"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/router"
	"github.com/mcprouter/mcprouter/router/modern"
)

// What a 2025 client is told of a 2026-07-28 backend's answer (backendResponse): a
// complete result passes as it is (its resultType and serverInfo are members a 2025
// client ignores), an error whose code the revisions number differently is renumbered
// (modern.ErrorToLegacy). An input_required result is the reversals' (reverse.go: the
// router asks the client and retries); only a forwarder without them (a test's) makes
// it an error that says so. A 2026-07-28 client gets the backend's answer untouched.

// legacyClient reports whether s speaks a 2025 revision (nil: no client session, the
// answer goes back untouched).
func legacyClient(s *router.Session) bool {
	return s != nil && !modern.IsModernVersion([]byte(s.Version()))
}

// toLegacyAnswer returns the error to answer a 2025 client with in place of the 2026
// backend's answer m; ok is false when m passes unchanged.
func toLegacyAnswer(b *backend, m *codec.Message) (code int, msg string, data []byte, ok bool) {
	switch m.Kind {
	case codec.KindResult:
		if string(modern.ReadResultType(m.Result)) != modern.ResultInputRequired {
			return 0, "", nil, false
		}
		var methods []string
		modern.EachInputRequest(m.Result, func(_, method, _ []byte) bool {
			methods = append(methods, string(method))
			return len(methods) < 8
		})
		return codec.CodeInternalError, "mcprouter: backend " + b.cfg.Name +
			" asked the client for input (input_required: " + strings.Join(methods, ", ") +
			"); turning that into requests on a 2025-era session is not translated yet", nil, true
	case codec.KindError:
		e, isRPC := rpcErrorOf(m.Error).(*router.Error)
		if !isRPC {
			return 0, "", nil, false
		}
		legacy := modern.ErrorToLegacy(e.Code)
		if legacy == e.Code {
			return 0, "", nil, false
		}
		return legacy, e.Message, e.Data, true
	}
	return 0, "", nil, false
}
