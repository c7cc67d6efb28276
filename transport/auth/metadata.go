package auth

import (
	"encoding/json"
	"fmt"
	"net/url"
	"path"
	"slices"
	"strings"
)

// WellKnownPath is the root of the protected resource metadata (RFC 9728 3).
const WellKnownPath = "/.well-known/oauth-protected-resource"

// metadataURL is the URL of the metadata of resource: the well-known path inserted
// between its host and its path (RFC 9728 3.1), https://h/mcp giving
// https://h/.well-known/oauth-protected-resource/mcp.
func metadataURL(resource string) (string, error) {
	u, err := url.Parse(resource)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return "", fmt.Errorf("%q is not an absolute URL", resource)
	}
	return u.Scheme + "://" + u.Host + insertWellKnown(u.EscapedPath()), nil
}

// insertWellKnown is the well-known path for a resource path ("" and "/" give the root).
func insertWellKnown(p string) string {
	p = strings.TrimRight(p, "/")
	if p == "" {
		return WellKnownPath
	}
	if p[0] != '/' {
		p = "/" + p
	}
	return WellKnownPath + p
}

// MetadataPaths are the paths the metadata document is served at: the root well-known
// path, the path-inserted form of the resource's own path, and that of each MCP endpoint
// path (RFC 9728 3.1; the MCP spec has clients try the path-inserted form, then the root).
func (a *Authenticator) MetadataPaths(mcpPaths ...string) []string {
	out := []string{WellKnownPath}
	add := func(p string) {
		if w := insertWellKnown(path.Clean("/" + p)); !slices.Contains(out, w) {
			out = append(out, w)
		}
	}
	if u, err := url.Parse(a.resource); err == nil && a.resource != "" {
		add(u.EscapedPath())
	}
	for _, p := range mcpPaths {
		add(p)
	}
	return out
}

// Metadata is the protected resource metadata document (RFC 9728 2), JSON; nil when
// authentication is off.
func (a *Authenticator) Metadata() []byte { return a.metadata }

// metadataDoc is the document's shape (RFC 9728 2).
type metadataDoc struct {
	Resource               string   `json:"resource"`
	AuthorizationServers   []string `json:"authorization_servers,omitempty"`
	ScopesSupported        []string `json:"scopes_supported,omitempty"`
	BearerMethodsSupported []string `json:"bearer_methods_supported"`
	ResourceName           string   `json:"resource_name,omitempty"`
}

func buildMetadata(cfg Config) ([]byte, error) {
	return json.Marshal(metadataDoc{
		Resource:               cfg.Resource,
		AuthorizationServers:   cfg.AuthorizationServers,
		ScopesSupported:        cfg.ScopesSupported,
		BearerMethodsSupported: []string{"header"},
		ResourceName:           cfg.ResourceName,
	})
}
