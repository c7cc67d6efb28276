package transport

import (
	"errors"

	"github.com/mcprouter/mcprouter/codec"
)

// codecError counts a message the codec rejected under its JSON-RPC class: parse errors
// (-32700: not JSON, broken array) and invalid requests (-32600: JSON, but not a
// JSON-RPC message). Metrics read the counters; the answer is made by errorParts.
func (st *HTTPStats) codecError(err error) {
	if errors.Is(err, codec.ErrParse) {
		st.ParseErrors.Add(1)
		return
	}
	st.InvalidRequests.Add(1)
}
