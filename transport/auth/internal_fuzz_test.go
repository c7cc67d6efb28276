package auth

import "testing"

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
