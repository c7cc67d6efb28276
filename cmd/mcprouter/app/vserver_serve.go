package app

import (
	"context"
	"fmt"
	"log/slog"
	"slices"

	"github.com/valyala/fasthttp"

	"github.com/mcprouter/mcprouter/router/policy"
	"github.com/mcprouter/mcprouter/transport"
	"github.com/mcprouter/mcprouter/transport/auth"
)

// vserver is a running virtual server: its Authenticator, its own session registry
// (sessions opened here are found nowhere else) and Streamable HTTP server on the
// shared router, and its limit sharing (its policy engine is the fleet's).
type vserver struct {
	name string
	path string
	auth *auth.Authenticator
	reg  *transport.Registry
	http *transport.HTTPServer
	sync *policy.Sync
	meta []string // paths of its protected resource metadata (none with auth off)
}

// vservers are the App's virtual servers, by path.
type vservers struct {
	VServers []*vserver
	byPath   map[string]*vserver
}

// startVServers builds each virtual server on the shared router with hc, the main
// endpoint's HTTP configuration (the same Host and Origin rules, limits and streams),
// and hands its engine to the fleet. On error what was built is stopped.
func (a *App) startVServers(hc transport.HTTPConfig, log *slog.Logger) error {
	if len(a.cfg.VirtualServers) == 0 {
		return nil
	}
	if a.Fleet == nil {
		return fmt.Errorf("virtual_servers: no backends to serve")
	}
	a.vservers.byPath = map[string]*vserver{}
	for i := range a.cfg.VirtualServers {
		v, err := a.startVServer(&a.cfg.VirtualServers[i], hc, log)
		if err != nil {
			a.stopVServers()
			return fmt.Errorf("virtual_servers[%d] (%s): %w", i, a.cfg.VirtualServers[i].Name, err)
		}
		a.vservers.VServers = append(a.vservers.VServers, v)
		a.vservers.byPath[v.path] = v
		for _, p := range v.meta {
			a.vservers.byPath[p] = v
		}
	}
	return nil
}

func (a *App) startVServer(c *VirtualServer, hc transport.HTTPConfig, log *slog.Logger) (*vserver, error) {
	v := &vserver{name: c.Name, path: a.cfg.vserverPath(c.Name)}
	ctx, cancel := context.WithTimeout(context.Background(), authStartTimeout)
	defer cancel()
	authn, err := auth.New(ctx, c.Auth, auth.Options{Logger: log.With("component", "auth", "endpoint", c.Name), Endpoint: c.Name})
	if err != nil {
		return nil, fmt.Errorf("auth: %w", err)
	}
	v.auth = authn
	e, err := policy.New(c.Policy, policy.Options{Logger: log.With("endpoint", c.Name), Scope: c.Scope()})
	if err != nil {
		authn.Close()
		return nil, fmt.Errorf("policy: %w", err)
	}
	if l := e.Limiter(); l != nil && a.Bus != nil && a.Bus.NC != nil {
		s, err := policy.StartSync(l, a.Bus.NC, policy.SyncOptions{
			Subject: a.Bus.Subject("policy", "limits", "vs", c.Name), Interval: e.Config().SyncInterval, Logger: log,
		})
		if err != nil {
			authn.Close()
			return nil, fmt.Errorf("policy: cluster-wide limits: %w", err)
		}
		v.sync = s
	}
	a.Fleet.SetEndpointPolicy(c.Name, e)
	hc.Auth = authn
	hc.LegacyEndpoint = "" // Streamable HTTP only: legacy HTTP+SSE stays on the main endpoint
	v.reg = transport.NewRegistry(a.cfg.Sessions.registryConfig(), a.Router)
	v.http = transport.NewHTTPServer(hc, v.reg, a.Router)
	if authn.Authenticates() {
		// The root well-known path is the main endpoint's; the endpoint's own is the
		// path-inserted one of its resource and of its path.
		v.meta = slices.DeleteFunc(v.http.MetadataPaths(v.path), func(p string) bool { return p == auth.WellKnownPath })
	}
	return v, nil
}

// withVServers serves each virtual server's endpoint and metadata paths, and passes
// every other request to h (the main endpoints).
func (a *App) withVServers(h fasthttp.RequestHandler) fasthttp.RequestHandler {
	if len(a.vservers.byPath) == 0 {
		return h
	}
	return func(ctx *fasthttp.RequestCtx) {
		v := a.vservers.byPath[string(ctx.Path())]
		switch {
		case v == nil:
			h(ctx)
		case string(ctx.Path()) == v.path:
			v.http.ServeStreamable(ctx)
		default:
			v.http.ServeMetadata(ctx)
		}
	}
}

// stopVServers ends the virtual servers' streams and sessions and releases their
// authenticators and limit sharing.
func (a *App) stopVServers() {
	for _, v := range a.vservers.VServers {
		v.http.Shutdown()
		v.reg.Close()
		v.auth.Close()
		if v.sync != nil {
			v.sync.Close()
		}
	}
}

// VServerURL is the Streamable HTTP URL of the virtual server name.
func (a *App) VServerURL(name string) string {
	return "http://" + a.Addr() + a.cfg.vserverPath(name)
}
