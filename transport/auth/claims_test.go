package auth_test

import (
	"testing"

	"github.com/mcprouter/mcprouter/transport/auth"
	"github.com/mcprouter/mcprouter/transport/auth/authtest"
)

// TestClaimNamesExact: claim names are case-sensitive (RFC 7519 4: names are compared as
// strings) and each appears once. A claim an issuer lets users name ("Sub", "AUD", a
// mapper's attribute) must not stand in for a registered claim that is missing, and a
// payload with a claim twice is refused, not read as its last copy: either would let
// the contents of a user-controlled claim decide who the caller is, which resource the
// token is for, or when it expires.
func TestClaimNamesExact(t *testing.T) {
	p, a := startJWT(t, auth.Options{CacheSize: -1}, nil)
	good := authtest.Claims{Subject: "alice", Audience: []string{resource}}
	with := func(omit string, extra map[string]any) string {
		c := good
		c.Omit, c.Extra = []string{omit}, extra
		return p.Token(c)
	}
	cases := []struct {
		name   string
		token  string
		reason auth.Reason
	}{
		{"SUB without sub", with("sub", map[string]any{"SUB": "admin"}), auth.ReasonBadClaims},
		{"Sub without sub", with("sub", map[string]any{"Sub": "admin"}), auth.ReasonBadClaims},
		{"EXP without exp", with("exp", map[string]any{"EXP": 4102444800}), auth.ReasonBadClaims},
		{"Aud without aud", with("aud", map[string]any{"Aud": resource}), auth.ReasonWrongAudience},
		{"ISS without iss", with("iss", map[string]any{"ISS": p.Issuer}), auth.ReasonWrongIssuer},
		{"sub twice", p.SignPayload(`{"iss":"` + p.Issuer + `","sub":"alice","aud":"` + resource +
			`","exp":4102444800,"sub":"admin"}`), auth.ReasonBadClaims},
		{"exp twice", p.SignPayload(`{"iss":"` + p.Issuer + `","sub":"alice","aud":"` + resource +
			`","exp":1,"exp":4102444800}`), auth.ReasonBadClaims},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := a.Check(bearer(tc.token), false)
			if v.Status != 401 || v.Reason != tc.reason {
				sub := ""
				if v.Principal != nil {
					sub = v.Principal.Subject
				}
				t.Fatalf("Check = %d %s (subject %q), want 401 %s", v.Status, v.Reason, sub, tc.reason)
			}
		})
	}
}
