package auth

import (
	"encoding/json"
	"testing"
	"time"
)

// FuzzParseKeySet: a JWKS document from the network never panics the parser, and what
// it keeps is a public signing key.
func FuzzParseKeySet(f *testing.F) {
	for _, s := range []string{
		`{"keys":[]}`,
		`{"keys":[{"kty":"oct","k":"c2VjcmV0","kid":"1"}]}`,
		`{"keys":[{"kty":"EC","crv":"P-256","x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU","y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0","kid":"e","use":"sig"}]}`,
		`{"keys":[{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo","use":"enc"}]}`,
		`{"keys":[{"kty":"RSA","n":"AQAB","e":"AQAB"}]}`,
		`[]`, `null`, `{"keys":null}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		set, err := parseKeySet(b)
		if err != nil {
			return
		}
		for _, k := range set.all {
			if !k.IsPublic() || (k.Use != "" && k.Use != "sig") {
				t.Fatalf("kept %+v", k)
			}
		}
	})
}

// FuzzBearerToken: the split of an Authorization header agrees with the grammar.
func FuzzBearerToken(f *testing.F) {
	for _, s := range []string{"Bearer abc", "bearer  a.b.c  ", "Bearer", "Bearerx", "Basic a", "Bearer a=b", "Bearer ab=="} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, h []byte) {
		tok, isBearer := bearerToken(h)
		if tok != nil && !isBearer {
			t.Fatalf("%q: token %q bearer %v", h, tok, isBearer)
		}
		if tok != nil {
			peekHeader(tok) // must not panic on any token
		}
	})
}

// FuzzClaims: any payload a key of the issuer could have signed is read without panic,
// and one accepted names a subject, this issuer, this resource and an exp still ahead
// (within the skew), with every claim name matched exactly.
func FuzzClaims(f *testing.F) {
	const iss, aud = "https://issuer.example", "https://mcp.example/mcp"
	for _, s := range []string{
		`{"iss":"` + iss + `","sub":"alice","aud":"` + aud + `","exp":4102444800}`,
		`{"iss":"` + iss + `","sub":"alice","aud":["x","` + aud + `/"],"exp":4102444800,"scope":"a b"}`,
		`{"iss":"` + iss + `","SUB":"admin","aud":"` + aud + `","exp":4102444800}`,
		`{"iss":"` + iss + `","sub":"alice","sub":"admin","aud":"` + aud + `","exp":4102444800}`,
		`{"iss":"` + iss + `","sub":"alice","aud":"` + aud + `","exp":4102444800,"scp":["a"],"nbf":1}`,
		`{"exp":1e400}`, `[]`, `null`, `{"aud":7}`,
	} {
		f.Add([]byte(s))
	}
	v := &jwtVerifier{issuer: iss, audiences: map[string]bool{canonicalURI(aud): true}, skew: time.Minute,
		now: time.Now, cache: newTokenCache(4)}
	f.Fuzz(func(t *testing.T, payload []byte) {
		now := time.Now()
		p, r := v.claims([]byte("a.b.c"), payload, now, v.cache.generation())
		if r != ReasonOK {
			if p != nil {
				t.Fatalf("refused (%s) with a principal", r)
			}
			return
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(payload, &m); err != nil {
			t.Fatalf("accepted a payload encoding/json cannot read: %v", err)
		}
		if p.Subject == "" || p.Issuer != iss || !now.Before(p.Expiry.Add(time.Minute)) ||
			m["sub"] == nil || m["iss"] == nil || m["aud"] == nil || m["exp"] == nil {
			t.Fatalf("accepted %q as %+v", payload, p)
		}
	})
}
