package app

import (
	"github.com/mcprouter/mcprouter/router/policy"
)

// swapPolicy puts e (nil: no policy) in the place of the running policy, for a reload:
// the fleet decides the next requests with it (those deciding keep the old one) and
// tells the sessions whose view of the lists changed (Fleet.SetPolicy); the rate limits'
// cluster-wide sharing follows the new limits. The new limits start with full buckets.
func (a *App) swapPolicy(e *policy.Engine) {
	old := a.policyState.Sync
	a.policyState.Sync = nil
	if old != nil {
		old.Close()
	}
	a.Fleet.SetPolicy(e)
	a.Policy = e
	if e == nil {
		return
	}
	if l := e.Limiter(); l != nil && a.Bus != nil && a.Bus.NC != nil {
		s, err := policy.StartSync(l, a.Bus.NC, policy.SyncOptions{
			Subject: a.Bus.Subject("policy", "limits"), Interval: e.Config().SyncInterval, Logger: a.log,
		})
		if err != nil {
			// The limits still hold on this instance; only their sharing is lost.
			a.log.Warn("policy reload: rate limits apply per instance until the next reload", "err", err)
			return
		}
		a.policyState.Sync = s
	}
}
