package app

import (
	"errors"
	"fmt"
	"net/url"
	"path"
	"strings"

	"github.com/mcprouter/mcprouter/router/policy"
	"github.com/mcprouter/mcprouter/transport/auth"
)

// Virtual servers (tenancy, issue 14): more MCP endpoints on the one listener, each at
// <paths.mcp>/<name> (Streamable HTTP; legacy HTTP+SSE clients open
// <paths.mcp>/<name>/sse, whose endpoint event names <paths.mcp>/<name>/message) with
// its own selection of the backends and of their tools and prompts, its own
// authentication (and protected resource metadata) and its own policy.
// They share the router, its backends and their connections; what keeps them apart is
// the principal: each endpoint's Authenticator stamps its name on the principals it
// makes (auth.Principal.Endpoint), so a session opened on one endpoint belongs to nobody
// on another, and the fleet decides and filters each request with its endpoint's
// engine, whose Scope is the selection (router/policy/scope.go).
//
//	virtual_servers:
//	  - name: team-a               # served at /mcp/team-a
//	    backends: [a]              # default: every backend
//	    include: ["a__*"]          # glob patterns on the exposed tool and prompt names
//	    exclude: ["a__fail"]
//	    auth: {mode: bearer, resource: https://mcp.example.com/mcp/team-a, bearer_tokens: [...]}
//	    policy: {rules: [...], limits: [...]}

// VirtualServer is one entry of virtual_servers.
type VirtualServer struct {
	// Name is the endpoint's last path segment (<paths.mcp>/<name>) and what its
	// principals, logs and limits are named by: letters, digits, - and _.
	Name string `yaml:"name"`
	// Backends are the names of the backends it serves; empty: every backend.
	Backends []string `yaml:"backends"`
	// Include and Exclude select among the tools and prompts of those backends by their
	// exposed name: * matches any run of characters, ? one. A name is exposed when it
	// matches some Include (or Include is empty) and no Exclude.
	Include []string `yaml:"include"`
	Exclude []string `yaml:"exclude"`
	// Auth is the endpoint's own authentication, keys as in auth:. Its resource should
	// be the endpoint's own URL: the metadata document is served at the well-known path
	// derived from it (RFC 9728 3.1), and JWTs must name it as their audience. Mode off
	// serves the endpoint's clients as its one anonymous principal.
	Auth auth.Config `yaml:"auth"`
	// Policy is the endpoint's own rules and limits, keys as in policy:.
	Policy policy.Config `yaml:"policy"`
}

// Scope is the policy's form of the endpoint's selection.
func (v *VirtualServer) Scope() policy.Scope {
	return policy.Scope{Backends: v.Backends, Include: v.Include, Exclude: v.Exclude}
}

// vserverPath is where the virtual server name is served.
func (c *Config) vserverPath(name string) string {
	return strings.TrimSuffix(c.Paths.MCP, "/") + "/" + name
}

func (c *Config) vserverDefaults() {
	for i := range c.VirtualServers {
		c.VirtualServers[i].Auth.Defaults()
	}
}

// validateVServers checks virtual_servers, naming the bad key as
// virtual_servers[i].<key>; the auth and policy keys are those of the main sections.
func (c *Config) validateVServers() error {
	backends := map[string]bool{}
	for _, b := range c.Backends {
		backends[b.Name] = true
	}
	seen := map[string]bool{}
	for i := range c.VirtualServers {
		v := &c.VirtualServers[i]
		key := fmt.Sprintf("virtual_servers[%d]", i)
		if err := validName(v.Name); err != nil {
			return fmt.Errorf("%s.name: %w", key, err)
		}
		if seen[v.Name] {
			return fmt.Errorf("%s.name: %q is used twice", key, v.Name)
		}
		seen[v.Name] = true
		p := c.vserverPath(v.Name)
		for _, vp := range []string{p, p + vserverSSE, p + vserverMessage} {
			if vp == c.Paths.SSE || vp == c.Paths.Message {
				return fmt.Errorf("%s.name: its path %s is paths.sse or paths.message", key, vp)
			}
		}
		for j, b := range v.Backends {
			if !backends[b] {
				return fmt.Errorf("%s.backends[%d]: %q is not the name of a backend", key, j, b)
			}
		}
		sc := v.Scope()
		if err := sc.Validate(key); err != nil {
			return err
		}
		if err := v.Auth.Validate(isLoopback(c.Listen)); err != nil {
			return prefixKeys(key, err)
		}
		if err := c.validateVServerResource(key, v); err != nil {
			return err
		}
		if err := v.Policy.Validate(); err != nil {
			return prefixKeys(key, err)
		}
	}
	return nil
}

// validateVServerResource refuses a virtual server whose metadata document would be
// served where another endpoint's is: its auth.resource must have a path of its own.
func (c *Config) validateVServerResource(key string, v *VirtualServer) error {
	if v.Auth.Mode != auth.ModeBearer && v.Auth.Mode != auth.ModeJWT || v.Auth.ResourceMetadataURL != "" {
		return nil
	}
	u, err := url.Parse(v.Auth.Resource)
	if err != nil {
		return nil // Validate said so already
	}
	if p := path.Clean("/" + u.Path); p == "/" || p == c.Paths.MCP {
		return fmt.Errorf("%s.auth.resource: %q is the main endpoint's; give the virtual server its own URL (for example ending in %s) so that its metadata has a path of its own",
			key, v.Auth.Resource, c.vserverPath(v.Name))
	}
	return nil
}

// validName accepts a virtual server's name: 1 to 64 of letters, digits, - and _.
func validName(name string) error {
	if name == "" {
		return errors.New("required")
	}
	if len(name) > 64 {
		return fmt.Errorf("%q is longer than 64 characters", name)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return fmt.Errorf("%q: only letters, digits, - and _ (it is a path segment and names the endpoint's principals)", name)
		}
	}
	return nil
}

// prefixKeys puts key. in front of each line of err, whose lines each start with the key
// of a main section (auth.resource: ..., policy.rules[0] ...).
func prefixKeys(key string, err error) error {
	return errors.New(key + "." + strings.ReplaceAll(err.Error(), "\n", "\n"+key+"."))
}
