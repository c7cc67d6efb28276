package metrics

import "github.com/mcprouter/mcprouter/transport"

// A virtual server has an HTTP server and a session registry of its own: the figures
// read from them (HTTP requests, codec errors, open streams, sessions) sum the main
// endpoint's (Sources) and every virtual server's (Endpoint.HTTP and
// Endpoint.Sessions, from WatchEndpoints). Read from the main endpoint's alone, a
// virtual server's traffic would count nowhere.

// servers lists the HTTP servers and session registries of every MCP endpoint in
// force: the main endpoint's first, then the virtual servers'. For scrapes: it
// allocates.
func (m *Metrics) servers(src *Sources) (https []*transport.HTTPServer, regs []*transport.Registry) {
	if src.HTTP != nil {
		https = append(https, src.HTTP)
	}
	if src.Sessions != nil {
		regs = append(regs, src.Sessions)
	}
	eps := m.epSrc.Load()
	if eps == nil {
		return https, regs
	}
	for _, ep := range (*eps)() {
		if ep.Name == "" {
			continue // the main endpoint: Sources has its own
		}
		if ep.HTTP != nil {
			https = append(https, ep.HTTP)
		}
		if ep.Sessions != nil {
			regs = append(regs, ep.Sessions)
		}
	}
	return https, regs
}

// httpSums are the HTTP counters of several endpoints, summed.
type httpSums struct {
	requests, rejected, parseErrors, invalidRequests uint64
	openStreams                                      int64
}

func sumHTTP(https []*transport.HTTPServer) httpSums {
	var s httpSums
	for _, h := range https {
		s.requests += h.Stats.Requests.Load()
		s.rejected += h.Stats.Rejected.Load()
		s.parseErrors += h.Stats.ParseErrors.Load()
		s.invalidRequests += h.Stats.InvalidRequests.Load()
		s.openStreams += h.Stats.OpenStreams.Load()
	}
	return s
}

// countAllSessions counts the live sessions of regs by transport and revision
// (countSessions of each, merged).
func countAllSessions(regs []*transport.Registry) map[sessionKey]int {
	out := map[sessionKey]int{}
	for _, reg := range regs {
		for k, n := range countSessions(reg) {
			out[k] += n
		}
	}
	return out
}
