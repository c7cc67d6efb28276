package auth

// WellKnownPath is the root of the protected resource metadata (RFC 9728 3).
const WellKnownPath = "/.well-known/oauth-protected-resource"

// MetadataPaths are the paths the metadata document is served at: the root well-known
// path and, for each MCP endpoint path, the path-inserted form (RFC 9728 3.1).
func (a *Authenticator) MetadataPaths(mcpPaths ...string) []string {
	return []string{WellKnownPath}
}

// Metadata is the protected resource metadata document (RFC 9728 2), JSON.
func (a *Authenticator) Metadata() []byte { return []byte("{}") }
