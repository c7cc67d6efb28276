package modern

// Version is the revision this package implements.
const Version = "2026-07-28"

// The reserved _meta keys of the revision (basic/index, "_meta").
const (
	KeyProtocolVersion    = "io.modelcontextprotocol/protocolVersion"
	KeyClientCapabilities = "io.modelcontextprotocol/clientCapabilities"
	KeyClientInfo         = "io.modelcontextprotocol/clientInfo"
	KeyLogLevel           = "io.modelcontextprotocol/logLevel"
	KeyServerInfo         = "io.modelcontextprotocol/serverInfo"
	KeySubscriptionID     = "io.modelcontextprotocol/subscriptionId"
)

// HTTP header names of the revision's Streamable HTTP binding. Header names are
// case-insensitive; the values are compared case-sensitively.
const (
	HeaderProtocolVersion = "MCP-Protocol-Version"
	HeaderMethod          = "Mcp-Method"
	HeaderName            = "Mcp-Name"
	HeaderParamPrefix     = "Mcp-Param-"
)

// IsModernVersion reports whether v names a revision served without sessions
// (2026-07-28 and later): the revisions are dates, so any well-formed date from
// 2026-07-28 on is modern, known or not (an unknown one then gets -32022 rather than
// being taken for a legacy client).
func IsModernVersion(v []byte) bool {
	if !dateSyntax(v) {
		return false
	}
	return string(v) >= Version
}

// dateSyntax reports whether v is YYYY-MM-DD.
func dateSyntax(v []byte) bool {
	if len(v) != 10 || v[4] != '-' || v[7] != '-' {
		return false
	}
	for i, c := range v {
		if i == 4 || i == 7 {
			continue
		}
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
