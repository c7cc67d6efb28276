package auth_test

import (
	"testing"

	"github.com/mcprouter/mcprouter/transport/auth"
)

// TestEndpointPrincipals: a virtual server's Authenticator stamps its name on every
// Principal it makes (part of the ID, so that the same token's sessions on two
// endpoints belong to two principals), and with mode off lets every request through as
// the endpoint's anonymous principal instead of none.
func TestEndpointPrincipals(t *testing.T) {
	a := start(t, bearerConfig(), auth.Options{Endpoint: "team-a"})
	v := a.Check([]byte("Bearer alice-token"), false)
	if v.Status != 0 || v.Principal.Endpoint != "team-a" || v.Principal.ID() != "@team-a alice" {
		t.Fatalf("bearer on an endpoint: %+v", v)
	}
	main := start(t, bearerConfig(), auth.Options{})
	if p := main.Check([]byte("Bearer alice-token"), false).Principal; p.ID() != "alice" || p.ID() == v.Principal.ID() {
		t.Fatalf("the main endpoint's alice is %q", p.ID())
	}
	if v := a.Check(nil, false); v.Status != 401 {
		t.Fatalf("no token on an endpoint with bearer: %+v", v)
	}

	off := start(t, auth.Config{Mode: auth.ModeOff}, auth.Options{Endpoint: "open"})
	if !off.Enabled() || off.Authenticates() {
		t.Fatal("mode off on an endpoint: checked (Enabled) without credentials (Authenticates)")
	}
	v = off.Check(nil, false)
	if v.Status != 0 || v.Principal == nil || v.Principal.ID() != "@open anonymous" {
		t.Fatalf("mode off on an endpoint: %+v", v)
	}
	plain := start(t, auth.Config{Mode: auth.ModeOff}, auth.Options{})
	if plain.Enabled() || plain.Check(nil, false).Principal != nil {
		t.Fatal("mode off on the main endpoint must check nothing and name nobody")
	}
}
