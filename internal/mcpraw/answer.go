package mcpraw

import "encoding/json"

// Answer is a JSON-RPC answer as the tests read it: a result with the members of a
// 2026-07-28 input_required result (or the text content of a tool's), or an error.
// The tests that drive the translation of input requests, through a router process and
// inside the fleet, read the same members.
type Answer struct {
	Result struct {
		ResultType    string                     `json:"resultType"`
		InputRequests map[string]json.RawMessage `json:"inputRequests"`
		RequestState  string                     `json:"requestState"`
		Content       []struct{ Text string }    `json:"content"`
	}
	Error *struct {
		Code    int
		Message string
	}
}
