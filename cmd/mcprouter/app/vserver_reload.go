package app

import (
	"errors"
	"fmt"
)

// A reload changes the virtual servers while the router runs, each by what changed in
// its section:
//
//   - unchanged: it stays as it is, sessions and streams included;
//   - added: built and served from the next request on;
//   - removed: its paths answer 404 at once (they fall through to the main endpoints),
//     the fleet denies what its sessions still have in flight (Fleet.SetEndpointPolicy
//     with nil), and its sessions end, their streams with the retry hint: a client that
//     comes back gets 404;
//   - its selection (backends, include, exclude) or policy changed: a new engine decides
//     its next requests, and its sessions whose view of a list changed get that list's
//     list_changed (Fleet.SetEndpointPolicy); its sessions stay;
//   - its auth changed: a new authenticator and HTTP server serve it, over the same
//     sessions (a session stays with the principal it was opened by, as the new
//     credentials name it), and the engine is built again as well.
//
// Everything that can fail (an authenticator's discovery, a rule's compilation, the
// limits' sharing) is built when the reload is planned (planVServers, the last of
// reloadParts); if anything fails, what was built is released and the whole reload is
// refused, the running virtual servers staying as they are. The step that serves the
// new set cannot fail.

// planVServers builds what next's virtual_servers need (p.cfg) and adds the step that
// serves them; nothing when the section is unchanged.
func (a *App) planVServers(p *reloadPlan) error {
	next := &p.cfg
	if sameYAML(a.cfg.VirtualServers, next.VirtualServers) {
		return nil
	}
	if len(next.VirtualServers) > 0 && a.Fleet == nil {
		return errors.New("virtual_servers: no backends to serve (the router started without any)")
	}
	cur := map[string]*vserver{}
	for _, v := range a.vservers.list() {
		cur[v.cfg.Name] = v
	}
	var (
		list    []*vserver
		changed []vserverChange
	)
	for i := range next.VirtualServers {
		c := &next.VirtualServers[i]
		if c.Policy.Audit && !a.auditing {
			// Its engine would audit, but nothing reports the calls to it before a
			// restart installs the audit observer.
			p.fixed = append(p.fixed, fmt.Sprintf("virtual_servers[%d].policy.audit", i))
		}
		old := cur[c.Name]
		if old != nil && sameYAML(old.cfg, *c) {
			list = append(list, old)
			continue
		}
		v, err := a.rebuildVServer(c, old)
		if err != nil {
			for _, ch := range changed {
				ch.abandon()
			}
			return fmt.Errorf("virtual_servers[%d] (%s): %w", i, c.Name, err)
		}
		list = append(list, v)
		changed = append(changed, vserverChange{old: old, next: v})
	}
	p.steps = append(p.steps, reloadStep{"virtual_servers", func() {
		a.swapVServers(list, changed)
		a.cfg.VirtualServers = next.VirtualServers
	}})
	return nil
}

// vserverChange is one virtual server a reload adds (old nil) or changes.
type vserverChange struct{ old, next *vserver }

// rebuildVServer builds c in the place of old (nil: a new virtual server): on old's
// sessions, and with old's authenticator and HTTP server when its auth is unchanged.
func (a *App) rebuildVServer(c *VirtualServer, old *vserver) (*vserver, error) {
	if old == nil {
		return a.buildVServer(c, nil)
	}
	if !sameYAML(old.cfg.Auth, c.Auth) {
		return a.buildVServer(c, old.reg)
	}
	v := &vserver{cfg: *c, path: old.path, auth: old.auth, reg: old.reg, http: old.http, meta: old.meta}
	if err := a.buildVServerPolicy(v); err != nil {
		return nil, err
	}
	return v, nil
}

// abandon releases what rebuildVServer built for a change that is not applied.
func (ch vserverChange) abandon() {
	switch {
	case ch.old == nil:
		stopEach([]*vserver{ch.next})
	case ch.next.auth != ch.old.auth:
		ch.next.release() // the sessions are old's
	case ch.next.sync != nil:
		ch.next.sync.Close()
	}
}

// swapVServers puts list in service: the next requests route on it; the fleet decides
// with the new and changed engines and denies the removed endpoints' requests; then
// the removed virtual servers end, and what the changed ones no longer use is released.
//
// An added virtual server's engine is in the fleet before its path is served: a client
// that connects as soon as another endpoint's list_changed tells it of the reload would
// otherwise be decided with no engine of its endpoint's in the window between the two.
func (a *App) swapVServers(list []*vserver, changed []vserverChange) {
	prev := a.vservers.list()
	for _, ch := range changed {
		if ch.old == nil {
			a.Fleet.SetEndpointPolicy(ch.next.cfg.Name, ch.next.eng) // no session yet: nobody to tell
		}
	}
	a.countVServers(list)
	a.vservers.table.Store(newVServerTable(list))
	kept := map[string]bool{}
	for _, v := range list {
		kept[v.cfg.Name] = true
	}
	var removed []*vserver
	for _, v := range prev {
		if !kept[v.cfg.Name] {
			removed = append(removed, v)
			a.Fleet.SetEndpointPolicy(v.cfg.Name, nil)
		}
	}
	for _, ch := range changed {
		if ch.old != nil {
			a.Fleet.SetEndpointPolicy(ch.next.cfg.Name, ch.next.eng)
		}
	}
	stopEach(removed)
	for _, ch := range changed {
		if ch.old == nil {
			continue
		}
		if ch.old.sync != nil {
			ch.old.sync.Close()
		}
		if ch.next.auth != ch.old.auth {
			ch.old.auth.Close() // its HTTP server goes with the requests still on it
		}
	}
	var names []string
	for _, ch := range changed {
		names = append(names, ch.next.cfg.Name)
	}
	for _, v := range removed {
		names = append(names, v.cfg.Name+" (removed)")
	}
	a.log.Info("configuration reload: virtual servers changed", "changed", names, "served", len(list))
}
