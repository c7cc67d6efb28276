package auth

import "testing"

// TestSameID: SameID agrees with comparing IDs, for every pair of a set of principals
// that differ in one field each (and nil, the principal of no authentication).
func TestSameID(t *testing.T) {
	ps := []*Principal{
		nil,
		{},
		{Subject: "alice"},
		{Subject: "bob"},
		{Issuer: "https://idp.example", Subject: "alice"},
		{Issuer: "https://idp.example", Subject: "alice", Scopes: []string{"mcp"}},
		{Endpoint: "tools", Subject: "alice"},
		{Endpoint: "tools", Issuer: "https://idp.example", Subject: "alice"},
	}
	for _, a := range ps {
		for _, b := range ps {
			if got, want := a.SameID(b), a.ID() == b.ID(); got != want {
				t.Errorf("%+v SameID %+v = %v, IDs %q and %q", a, b, got, a.ID(), b.ID())
			}
		}
	}
}
