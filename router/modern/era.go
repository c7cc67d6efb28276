package modern

import (
	"net/http"
	"strconv"

	"github.com/mcprouter/mcprouter/codec"
)

// HTTPStatus is the HTTP status of a 2026-07-28 answer carrying the JSON-RPC error code
// (0 for a result): 404 for an unknown method, 400 for the revision's request errors, 200
// otherwise (an error about the call itself, such as an unknown tool, is a JSON-RPC
// matter). The transport applies it to what the router or a backend answered.
func HTTPStatus(code int) int {
	switch code {
	case codec.CodeMethodNotFound:
		return http.StatusNotFound
	case codec.CodeHeaderMismatch, codec.CodeMissingCapability, codec.CodeUnsupportedVersion:
		return http.StatusBadRequest
	}
	return http.StatusOK
}

// ErrorCode reads the code of a raw JSON-RPC error object (codec.Message.Error), 0 when
// it has none.
func ErrorCode(errObj []byte) int {
	n, err := strconv.Atoi(string(codec.Member(errObj, "code")))
	if err != nil {
		return 0
	}
	return n
}

// IsModernError reports whether code is one only a 2026-07-28 server sends: the
// revision's rule for telling a modern server from a legacy one by its refusal.
func IsModernError(code int) bool {
	return code == codec.CodeHeaderMismatch || code == codec.CodeMissingCapability || code == codec.CodeUnsupportedVersion
}

// Era is a backend's protocol generation.
type Era uint8

const (
	EraUnknown Era = iota
	EraLegacy      // initialize and sessions (2024-11-05 to 2025-11-25)
	EraModern      // 2026-07-28: stateless
)

// ProbeEra judges a backend's answer to the server/discover probe (versioning, backward
// compatibility): a DiscoverResult naming a modern version, or a modern error, is a
// modern server; anything else (method not found, invalid request, a 2025 error) a
// legacy one, to be initialized. resp is the scanned answer.
func ProbeEra(resp *codec.Message) Era {
	switch resp.Kind {
	case codec.KindResult:
		modern := false
		eachArray(codec.Member(resp.Result, "supportedVersions"), func(v []byte) bool {
			if s, ok := stringContents(v); ok && IsModernVersion(s) {
				modern = true
				return false
			}
			return true
		})
		if modern {
			return EraModern
		}
		return EraLegacy
	case codec.KindError:
		if IsModernError(ErrorCode(resp.Error)) {
			return EraModern
		}
		return EraLegacy
	}
	return EraUnknown
}

// SupportedVersions calls fn with each version (raw contents) of a DiscoverResult's
// supportedVersions or of an UnsupportedProtocolVersionError's data.supported.
func SupportedVersions(resp *codec.Message, fn func(v []byte) bool) {
	list := codec.Member(resp.Result, "supportedVersions")
	if resp.Kind == codec.KindError {
		list = codec.Member(codec.Member(resp.Error, "data"), "supported")
	}
	eachArray(list, func(v []byte) bool {
		if s, ok := stringContents(v); ok {
			return fn(s)
		}
		return true
	})
}
