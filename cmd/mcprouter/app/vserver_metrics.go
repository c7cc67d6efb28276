package app

import (
	"github.com/mcprouter/mcprouter/router/metrics"
)

// countVServers makes the metrics count requests per endpoint for the main endpoint
// and each of list (none without virtual servers); called before list is served, at
// start and by a reload.
func (a *App) countVServers(list []*vserver) {
	if a.Metrics == nil {
		return
	}
	a.Metrics.WatchEndpoints(a.endpointsNow)
	names := make([]string, 0, len(list))
	for _, v := range list {
		names = append(names, v.cfg.Name)
	}
	a.Metrics.SetEndpoints(names)
}

// endpointsNow lists the MCP endpoints in force for the metrics: the main one and
// each virtual server, with their sessions, HTTP servers and policy engines.
func (a *App) endpointsNow() []metrics.Endpoint {
	list := a.vservers.list()
	out := make([]metrics.Endpoint, 0, len(list)+1)
	main := metrics.Endpoint{Sessions: a.Reg}
	if a.Fleet != nil {
		main.Policy = a.Fleet.PolicyFor(nil)
	}
	out = append(out, main)
	for _, v := range list {
		out = append(out, metrics.Endpoint{Name: v.cfg.Name, Sessions: v.reg, HTTP: v.http, Policy: v.eng})
	}
	return out
}
