package app

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"

	"github.com/valyala/fasthttp"

	"github.com/mcprouter/mcprouter/router/policy"
	"github.com/mcprouter/mcprouter/transport"
	"github.com/mcprouter/mcprouter/transport/auth"
)

// vserver is a running virtual server: its Authenticator, its own session registry
// (sessions opened here are found nowhere else), its HTTP server on the shared router
// (Streamable HTTP at <path>, legacy HTTP+SSE at <path>/sse and <path>/message), its
// policy engine (the fleet decides with it) and its limit sharing. Immutable once
// served: a reload that changes it serves a new value over the same reg
// (vserver_reload.go).
type vserver struct {
	cfg  VirtualServer // as configured: what a reload compares
	path string
	auth *auth.Authenticator
	reg  *transport.Registry
	http *transport.HTTPServer
	eng  *policy.Engine
	sync *policy.Sync
	meta []string // paths of its protected resource metadata (none with auth off)
}

// The paths of a virtual server's legacy HTTP+SSE endpoints, under its own path as the
// main endpoint's paths.sse and paths.message are beside paths.mcp.
const (
	vserverSSE     = "/sse"
	vserverMessage = "/message"
)

// vservers are the App's virtual servers. The table is swapped whole by a reload;
// requests route on the table they loaded.
type vservers struct {
	table atomic.Pointer[vserverTable]
	hc    transport.HTTPConfig // the main endpoint's, for the virtual servers a reload adds
	// reg is the main registry's configuration, its memory budget included: every
	// endpoint's sessions draw on the one sessions.budget_bytes.
	reg  transport.RegistryConfig
	vlog *slog.Logger
}

// vserverTable is one immutable set of virtual servers.
type vserverTable struct {
	list   []*vserver             // in configuration order
	routes map[string]vserverPath // by request path
}

// vserverPath is what one path of a virtual server serves.
type vserverPath struct {
	v     *vserver
	serve func(*transport.HTTPServer, *fasthttp.RequestCtx)
}

// newVServerTable indexes list by the paths each serves.
func newVServerTable(list []*vserver) *vserverTable {
	t := &vserverTable{list: list, routes: map[string]vserverPath{}}
	for _, v := range list {
		t.routes[v.path] = vserverPath{v, (*transport.HTTPServer).ServeStreamable}
		t.routes[v.path+vserverSSE] = vserverPath{v, (*transport.HTTPServer).ServeLegacyStream}
		t.routes[v.path+vserverMessage] = vserverPath{v, (*transport.HTTPServer).ServeLegacyMessage}
		for _, p := range v.meta {
			t.routes[p] = vserverPath{v, (*transport.HTTPServer).ServeMetadata}
		}
	}
	return t
}

// list returns the virtual servers in force.
func (vs *vservers) list() []*vserver {
	if t := vs.table.Load(); t != nil {
		return t.list
	}
	return nil
}

// startVServers builds each virtual server on the shared router with hc, the main
// endpoint's HTTP configuration (the same Host and Origin rules, limits and streams),
// and hands its engine to the fleet. On error what was built is stopped.
func (a *App) startVServers(hc transport.HTTPConfig, log *slog.Logger) error {
	a.vservers.hc, a.vservers.vlog = hc, log
	if len(a.cfg.VirtualServers) == 0 {
		return nil
	}
	if a.Fleet == nil {
		return fmt.Errorf("virtual_servers: no backends to serve")
	}
	var list []*vserver
	for i := range a.cfg.VirtualServers {
		v, err := a.buildVServer(&a.cfg.VirtualServers[i], nil)
		if err != nil {
			stopEach(list)
			return fmt.Errorf("virtual_servers[%d] (%s): %w", i, a.cfg.VirtualServers[i].Name, err)
		}
		list = append(list, v)
	}
	for _, v := range list {
		a.Fleet.SetEndpointPolicy(v.cfg.Name, v.eng)
	}
	a.countVServers(list)
	a.vservers.table.Store(newVServerTable(list))
	return nil
}

// buildVServer builds the virtual server c, on reg when it continues one (a reload that
// changed its auth), else on a registry of its own. It does not hand its engine to the
// fleet. On error what was built is released.
func (a *App) buildVServer(c *VirtualServer, reg *transport.Registry) (*vserver, error) {
	log := a.vservers.vlog
	v := &vserver{cfg: *c, path: a.cfg.vserverPath(c.Name)}
	ctx, cancel := context.WithTimeout(context.Background(), authStartTimeout)
	defer cancel()
	authn, err := auth.New(ctx, c.Auth, auth.Options{Logger: log.With("component", "auth", "endpoint", c.Name), Endpoint: c.Name})
	if err != nil {
		return nil, fmt.Errorf("auth: %w", err)
	}
	v.auth = authn
	if err := a.buildVServerPolicy(v); err != nil {
		authn.Close()
		return nil, err
	}
	hc := a.vservers.hc
	hc.Auth = authn
	hc.LegacyEndpoint = v.path + vserverMessage
	v.reg = reg
	if v.reg == nil {
		v.reg = transport.NewRegistry(a.vservers.reg, a.Router)
	}
	v.http = transport.NewHTTPServer(hc, v.reg, a.Router)
	if authn.Authenticates() {
		// The root well-known path is the main endpoint's; the endpoint's own is the
		// path-inserted one of its resource and of its path.
		v.meta = slices.DeleteFunc(v.http.MetadataPaths(v.path), func(p string) bool { return p == auth.WellKnownPath })
	}
	return v, nil
}

// buildVServerPolicy builds v's engine from v.cfg (its rules, limits and selection) and
// starts its limits' cluster-wide sharing.
func (a *App) buildVServerPolicy(v *vserver) error {
	c := &v.cfg
	log := a.vservers.vlog
	e, err := policy.New(c.Policy, policy.Options{Logger: log.With("endpoint", c.Name), Scope: c.Scope()})
	if err != nil {
		return fmt.Errorf("policy: %w", err)
	}
	v.eng = e
	if l := e.Limiter(); l != nil && a.Bus != nil && a.Bus.NC != nil {
		s, err := policy.StartSync(l, a.Bus.NC, policy.SyncOptions{
			Subject: a.Bus.Subject("policy", "limits", "vs", c.Name), Interval: e.Config().SyncInterval, Logger: log,
		})
		if err != nil {
			return fmt.Errorf("policy: cluster-wide limits: %w", err)
		}
		v.sync = s
	}
	return nil
}

// withVServers serves each virtual server's endpoints and metadata paths, and passes
// every other request to h (the main endpoints, whose 404 a removed virtual server's
// paths get).
func (a *App) withVServers(h fasthttp.RequestHandler) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		if t := a.vservers.table.Load(); t != nil {
			if r, ok := t.routes[string(ctx.Path())]; ok {
				r.serve(r.v.http, ctx)
				return
			}
		}
		h(ctx)
	}
}

// stopVServers ends the virtual servers' streams and sessions and releases their
// authenticators and limit sharing.
func (a *App) stopVServers() {
	stopEach(a.vservers.list())
}

// stopEach stops each of list: its streams and sessions end (with the retry hint),
// its authenticator and limit sharing are released.
func stopEach(list []*vserver) {
	for _, v := range list {
		v.http.Shutdown()
		v.reg.Close()
		v.release()
	}
}

// release lets go of v's authenticator and limit sharing, not of its sessions.
func (v *vserver) release() {
	v.auth.Close()
	if v.sync != nil {
		v.sync.Close()
	}
}

// VServerURL is the Streamable HTTP URL of the virtual server name.
func (a *App) VServerURL(name string) string {
	return "http://" + a.Addr() + a.cfg.vserverPath(name)
}

// VServerSSEURL is the legacy HTTP+SSE stream URL of the virtual server name.
func (a *App) VServerSSEURL(name string) string {
	return a.VServerURL(name) + vserverSSE
}
