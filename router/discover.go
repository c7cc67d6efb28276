package router

import "github.com/mcprouter/mcprouter/router/modern"

// server/discover (2026-07-28): every revision the router speaks (it serves both
// generations whatever its backends speak), the capabilities merged over its backends,
// its serverInfo and instructions. The result depends on the fleet alone, not on the
// request, so it is built once and kept until the fleet changes: a fleet that counts
// its changes (GenerationalFleet) has the result rebuilt when the count moves; any
// other has it built for every request.

// GenerationalFleet is a fleet that counts the changes to what it offers: backends
// added, removed or replaced, and their lists and capabilities read anew (after they
// connected or announced a change). Generation moves, after the change is visible,
// whenever what the router builds from the fleet once (the discover result) may differ.
type GenerationalFleet interface {
	Generation() uint64
}

// discoverResult is the DiscoverResult object built for one generation of the fleet.
type discoverResult struct {
	gen    uint64
	result []byte // read only once built: shared by every request
}

// discover answers server/discover with the result of the fleet's current generation.
func (r *Router) discover(j *job) {
	j.reply(r.discoverResult())
}

// discoverResult returns the DiscoverResult object, rebuilt when the fleet's generation
// moved since it was built. Two requests that find it stale may both build it; the
// later store wins, and a result stored for an older generation is rebuilt by the next
// request that sees the newer one.
func (r *Router) discoverResult() []byte {
	gf, ok := r.fleet.(GenerationalFleet)
	if !ok {
		return r.buildDiscover()
	}
	// The generation first: what the build reads is then at least as new as it.
	gen := gf.Generation()
	if d := r.modern.discover.Load(); d != nil && d.gen == gen {
		return d.result
	}
	d := &discoverResult{gen: gen, result: r.buildDiscover()}
	r.modern.discover.Store(d)
	return d.result
}

// buildDiscover builds the DiscoverResult object from the fleet as it is.
func (r *Router) buildDiscover() []byte {
	caps := []byte(`{"logging":{}`)
	if r.fleet != nil {
		caps = r.fleet.AppendCapabilities(caps, V20260728)
	}
	caps = append(caps, '}')
	d := modern.Discover{
		Supported:    DiscoverVersions,
		Capabilities: caps,
		ServerInfo:   r.modern.decoration.ServerInfo,
		Instructions: r.cfg.Instructions,
		// What discover says changes only with the fleet's configuration, and is the
		// same for every client.
		Cache: modern.Cache{TTLms: 0, Scope: modern.ScopePublic},
	}
	return modern.AppendDiscoverResult(make([]byte, 0, len(caps)+256), &d)
}
