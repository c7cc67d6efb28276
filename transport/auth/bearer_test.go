package auth_test

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/mcprouter/mcprouter/transport/auth"
)

func sum(tok string) string {
	s := sha256.Sum256([]byte(tok))
	return hex.EncodeToString(s[:])
}

func bearerConfig() auth.Config {
	return auth.Config{
		Mode:           auth.ModeBearer,
		Resource:       resource,
		RequiredScopes: nil,
		BearerTokens: []auth.BearerToken{
			{Principal: "alice", SHA256: sum("alice-token")},
			{Principal: "bob", SHA256: strings.ToUpper(sum("bob-token")), Scopes: []string{"admin"}},
		},
	}
}

func TestCheckBearer(t *testing.T) {
	a := start(t, bearerConfig(), auth.Options{})
	if !a.Enabled() {
		t.Fatal("not enabled")
	}
	for _, tc := range []struct {
		header  string
		status  int
		reason  auth.Reason
		subject string
	}{
		{"Bearer alice-token", 0, auth.ReasonOK, "alice"},
		{"BEARER bob-token", 0, auth.ReasonOK, "bob"},
		{"Bearer  alice-token ", 0, auth.ReasonOK, "alice"},
		{"Bearer alice-token2", 401, auth.ReasonUnknownToken, ""},
		{"Bearer alice", 401, auth.ReasonUnknownToken, ""},
		{"Bearer " + sum("alice-token"), 401, auth.ReasonUnknownToken, ""},
		{"Bearer alice-token,", 400, auth.ReasonMalformed, ""},
		{"Bearertoken", 401, auth.ReasonMalformed, ""},
		{"Token alice-token", 401, auth.ReasonMalformed, ""},
	} {
		v := a.Check([]byte(tc.header), false)
		if v.Status != tc.status || v.Reason != tc.reason {
			t.Errorf("%q: %d %s, want %d %s", tc.header, v.Status, v.Reason, tc.status, tc.reason)
			continue
		}
		if tc.subject != "" {
			if v.Principal.Subject != tc.subject || v.Principal.ID() != tc.subject || v.Principal.Issuer != "" {
				t.Errorf("%q: principal %+v", tc.header, v.Principal)
			}
			if v.Principal.Token != strings.TrimSpace(strings.TrimPrefix(strings.TrimPrefix(tc.header, "Bearer "), "BEARER ")) {
				t.Errorf("%q: principal token %q", tc.header, v.Principal.Token)
			}
		}
	}
	v := a.Check([]byte("Bearer bob-token"), false)
	if !v.Principal.HasScope("admin") || !a.RequireScopes(v.Principal, []string{"admin"}).OK() {
		t.Errorf("bob's scopes: %v", v.Principal.Scopes)
	}
	if again := a.Check([]byte("Bearer bob-token"), false); again.Principal != v.Principal {
		t.Error("a static token's principal is built again on each request")
	}
	if r := a.RequireScopes(a.Check([]byte("Bearer alice-token"), false).Principal, []string{"admin"}); r.Status != 403 {
		t.Errorf("alice with admin needed: %+v", r)
	}
	if r := a.RequireScopes(nil, []string{"admin"}); r.Status != 403 {
		t.Errorf("no principal with admin needed: %+v", r)
	}
}

func TestOff(t *testing.T) {
	for _, mode := range []string{"", auth.ModeOff} {
		a := start(t, auth.Config{Mode: mode}, auth.Options{})
		if a.Enabled() {
			t.Errorf("mode %q: enabled", mode)
		}
		if v := a.Check(nil, true); !v.OK() || v.Principal != nil {
			t.Errorf("mode %q: %+v", mode, v)
		}
		if v := a.RequireScopes(nil, []string{"x"}); !v.OK() {
			t.Errorf("mode %q: RequireScopes %+v", mode, v)
		}
		if a.Metadata() != nil {
			t.Errorf("mode %q: metadata %s", mode, a.Metadata())
		}
	}
	var none *auth.Authenticator
	if none.Enabled() {
		t.Error("nil Authenticator enabled")
	}
	none.Close()
}

func TestStats(t *testing.T) {
	a := start(t, bearerConfig(), auth.Options{})
	a.Check([]byte("Bearer alice-token"), false)
	a.Check([]byte("Bearer alice-token"), false)
	a.Check(nil, false)
	a.Check([]byte("Bearer nope"), false)
	a.Check([]byte("Bearer alice-token"), true)
	a.RequireScopes(nil, []string{"x"})
	s := a.Stats()
	if len(s) != len(auth.Reasons) {
		t.Errorf("Stats has %d reasons, want %d", len(s), len(auth.Reasons))
	}
	want := map[auth.Reason]uint64{auth.ReasonOK: 2, auth.ReasonMissing: 1, auth.ReasonUnknownToken: 1,
		auth.ReasonTokenInQuery: 1, auth.ReasonInsufficientScope: 1}
	for r, n := range s {
		if n != want[r] || a.Count(r) != n {
			t.Errorf("%s: Stats %d Count %d, want %d", r, n, a.Count(r), want[r])
		}
	}
}
