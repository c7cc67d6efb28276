package auth

// reasonIndex numbers the Reasons for the counters.
var reasonIndex = func() map[Reason]int {
	m := make(map[Reason]int, len(Reasons))
	for i, r := range Reasons {
		m[r] = i
	}
	return m
}()

func (a *Authenticator) count(r Reason) {
	if i, ok := reasonIndex[r]; ok {
		a.counts[i].Add(1)
	}
}

// Stats returns how many requests ended with each reason since New: the outcomes of
// Check (ok included) and the refusals of RequireScopes. Every Reason is present, so an
// exporter can declare its series up front.
func (a *Authenticator) Stats() map[Reason]uint64 {
	m := make(map[Reason]uint64, len(Reasons))
	for i, r := range Reasons {
		var n uint64
		if a != nil && a.counts != nil {
			n = a.counts[i].Load()
		}
		m[r] = n
	}
	return m
}

// Count returns the count of one reason (Stats without the map, for a gauge function).
func (a *Authenticator) Count(r Reason) uint64 {
	i, ok := reasonIndex[r]
	if !ok || a == nil || a.counts == nil {
		return 0
	}
	return a.counts[i].Load()
}
