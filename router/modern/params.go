package modern

import (
	"bytes"
	"encoding/json"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/internal/asciifold"
)

// Mcp-Param-{Name} headers (basic/transports/streamable-http, "Custom Headers from Tool
// Parameters"): a tool's inputSchema may mark properties with x-mcp-header, and a
// client then mirrors their values into headers. Any server that processes the body
// must check that they agree (-32020, HTTP 400). A 2026-07-28 backend checks its own;
// a 2025 backend knows nothing of them, so the router, which serves the revision in its
// place, checks them against the tool definitions it lists.

// ParamHeader is one x-mcp-header declaration of a tool's inputSchema: the header's
// name part and the chain of properties keys that leads to the argument it mirrors.
type ParamHeader struct {
	Name string
	Path []string
}

// ParamHeaders returns the x-mcp-header declarations of a tool object (raw JSON),
// reachable from inputSchema through properties keys alone (the only ones the
// specification allows); nil when it has none. A tool that cannot have one (most) is
// not parsed: the router reads every tool it lists when the list comes.
func ParamHeaders(tool []byte) []ParamHeader {
	if !mayDeclareHeader(tool) {
		return nil
	}
	var t struct {
		InputSchema json.RawMessage `json:"inputSchema"`
	}
	if json.Unmarshal(tool, &t) != nil || t.InputSchema == nil {
		return nil
	}
	var out []ParamHeader
	collectParamHeaders(t.InputSchema, nil, &out, 0)
	return out
}

// mayDeclareHeader reports whether tool may hold the key x-mcp-header as
// encoding/json reads it: written in any case (its field names match case-insensitively,
// and no other character of this key folds to one of its letters), or with an escape.
func mayDeclareHeader(tool []byte) bool {
	return bytes.Contains(tool, []byte(`\u`)) || asciifold.Contains(tool, xMCPHeader)
}

const xMCPHeader = "x-mcp-header"

// maxSchemaDepth bounds the walk through nested properties.
const maxSchemaDepth = 16

func collectParamHeaders(schema json.RawMessage, path []string, out *[]ParamHeader, depth int) {
	if depth > maxSchemaDepth {
		return
	}
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
		Header     *string                    `json:"x-mcp-header"`
	}
	if json.Unmarshal(schema, &s) != nil {
		return
	}
	if s.Header != nil && len(path) > 0 && *s.Header != "" {
		*out = append(*out, ParamHeader{Name: *s.Header, Path: append([]string(nil), path...)})
	}
	for k, sub := range s.Properties {
		collectParamHeaders(sub, append(path, k), out, depth+1)
	}
}

var (
	rejectParamMissing = mismatch("an Mcp-Param header the tool declares (x-mcp-header) is missing while its argument is in the body")
	rejectParamValue   = mismatch("an Mcp-Param header does not match the argument it mirrors")
	rejectParamChars   = mismatch("an Mcp-Param header has invalid characters or invalid Base64")
)

// CheckParamHeaders judges the Mcp-Param-* headers of a tools/call (params, "Name:
// value\n" lines as the transport keeps them) against the arguments (raw object) for
// the tool's declarations decls: an argument present and not null needs its header, and
// a header must match its argument (MatchParam).
func CheckParamHeaders(decls []ParamHeader, arguments, params []byte) Reject {
	for _, d := range decls {
		body := arguments
		for _, k := range d.Path {
			body = codec.Member(body, k)
		}
		header, present := paramHeader(params, d.Name)
		if body == nil || string(body) == "null" {
			if present {
				return rejectParamValue
			}
			continue
		}
		if !present {
			return rejectParamMissing
		}
		match, valid := MatchParam(header, body)
		if !valid {
			return rejectParamChars
		}
		if !match {
			return rejectParamValue
		}
	}
	return Reject{}
}

// paramHeader finds the value of Mcp-Param-{name} (case-insensitive) in lines of
// "Name: value\n", where Name is the whole header name.
func paramHeader(lines []byte, name string) ([]byte, bool) {
	const prefix = "mcp-param-"
	for line := range bytes.Lines(lines) {
		k, v, ok := bytes.Cut(bytes.TrimSuffix(line, []byte("\n")), []byte(":"))
		if ok && len(k) == len(prefix)+len(name) && bytes.EqualFold(k[:len(prefix)], []byte(prefix)) && bytes.EqualFold(k[len(prefix):], []byte(name)) {
			return v, true
		}
	}
	return nil, false
}
