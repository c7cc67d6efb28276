package auth_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/mcprouter/mcprouter/transport/auth"
	"github.com/mcprouter/mcprouter/transport/auth/authtest"
)

// checkInvariants holds whatever the input: a known status, a principal exactly when
// accepted, and a challenge that is one printable header line naming the metadata.
func checkInvariants(t *testing.T, v auth.Verdict) {
	t.Helper()
	switch v.Status {
	case 0:
		if v.Principal == nil || v.Reason != auth.ReasonOK || v.Challenge != "" {
			t.Fatalf("accepted: %+v", v)
		}
		return
	case 400, 401, 403:
		if !strings.HasPrefix(v.Challenge, `Bearer resource_metadata="`) {
			t.Fatalf("%d without a challenge: %+v", v.Status, v)
		}
	case 503:
	default:
		t.Fatalf("status %d", v.Status)
	}
	if v.Principal != nil && v.Status != 403 {
		t.Fatalf("refused with a principal: %+v", v)
	}
	for i := 0; i < len(v.Challenge); i++ {
		if c := v.Challenge[i]; c < 0x20 || c > 0x7e {
			t.Fatalf("challenge byte %#x: %q", c, v.Challenge)
		}
	}
	if v.Challenge != "" {
		if cs, err := oauthex.ParseWWWAuthenticate([]string{v.Challenge}); err != nil || len(cs) != 1 || cs[0].Scheme != "bearer" {
			t.Fatalf("challenge %q parses as %v, %v", v.Challenge, cs, err)
		}
	}
}

// FuzzCheck feeds arbitrary Authorization headers to both modes.
func FuzzCheck(f *testing.F) {
	p := authtest.Start(f, authtest.Options{})
	good := p.Token(authtest.Claims{Subject: "alice", Audience: []string{resource}})
	for _, s := range []string{"", "Bearer", "Bearer ", "bearer alice-token", "Bearer alice-token", "Basic x",
		"Bearer a b", "Bearer ==", "Bearer a==", "Bearer a=b", "Bearer \x00", "Bearer\talice-token",
		"Bearer " + good, "Bearer " + p.Unsigned(authtest.Claims{}), "Bearer e30.e30.", "Bearer .."} {
		f.Add([]byte(s), false)
	}
	f.Add([]byte("Bearer alice-token"), true)
	jwtCfg := jwtConfig(p)
	aj := start(f, jwtCfg, auth.Options{})
	ab := start(f, bearerConfig(), auth.Options{})
	f.Fuzz(func(t *testing.T, h []byte, query bool) {
		for _, a := range []*auth.Authenticator{aj, ab} {
			v := a.Check(h, query)
			checkInvariants(t, v)
			if v.Status == 0 && query {
				t.Fatal("token in query accepted")
			}
		}
	})
}

// FuzzCheckToken mutates a valid JWT: whatever still verifies must carry the claims it
// was minted with.
func FuzzCheckToken(f *testing.F) {
	p := authtest.Start(f, authtest.Options{})
	c := authtest.Claims{Subject: "alice", Audience: []string{resource}, Scopes: []string{"mcp"}}
	for _, tok := range []string{p.Token(c), p.Tampered(c), p.Expired(c), p.HMACWithPublicKey(c), p.ForgedKid(c)} {
		f.Add([]byte(tok))
	}
	a := start(f, jwtConfig(p), auth.Options{})
	f.Fuzz(func(t *testing.T, tok []byte) {
		v := a.Check(append([]byte("Bearer "), tok...), false)
		checkInvariants(t, v)
		if v.Status == 0 && (v.Principal.Subject != "alice" || !v.Principal.HasScope("mcp") ||
			!bytes.Equal([]byte(v.Principal.Token), tok)) {
			t.Fatalf("accepted with %+v", v.Principal)
		}
	})
}
