package auth_test

import (
	"testing"

	"github.com/mcprouter/mcprouter/transport/auth"
	"github.com/mcprouter/mcprouter/transport/auth/authtest"
)

// The cost of Check per request: go test -bench Check -benchmem ./transport/auth/

func BenchmarkCheckBearer(b *testing.B) {
	a := start(b, bearerConfig(), auth.Options{})
	h := []byte("Bearer bob-token")
	benchCheck(b, a, h)
}

// BenchmarkCheckJWT is the steady state: the client's token was verified on its first
// request and is answered from the cache.
func BenchmarkCheckJWT(b *testing.B) {
	p := authtest.Start(b, authtest.Options{})
	a := start(b, jwtConfig(p), auth.Options{})
	benchCheck(b, a, bearer(p.Token(authtest.Claims{Audience: []string{resource}, Scopes: []string{"mcp"}})))
}

// BenchmarkCheckJWTUncached verifies the signature and claims on every request (RS256).
func BenchmarkCheckJWTUncached(b *testing.B) {
	p := authtest.Start(b, authtest.Options{})
	a := start(b, jwtConfig(p), auth.Options{CacheSize: -1})
	benchCheck(b, a, bearer(p.Token(authtest.Claims{Audience: []string{resource}, Scopes: []string{"mcp"}})))
}

// BenchmarkCheckJWTUncachedES256: the same with an ES256 key.
func BenchmarkCheckJWTUncachedES256(b *testing.B) {
	p := authtest.Start(b, authtest.Options{Algorithm: "ES256"})
	a := start(b, jwtConfig(p), auth.Options{CacheSize: -1})
	benchCheck(b, a, bearer(p.Token(authtest.Claims{Audience: []string{resource}, Scopes: []string{"mcp"}})))
}

// BenchmarkCheckJWTRefused is a token with a bad signature (never cached).
func BenchmarkCheckJWTRefused(b *testing.B) {
	p := authtest.Start(b, authtest.Options{})
	a := start(b, jwtConfig(p), auth.Options{})
	h := bearer(p.Tampered(authtest.Claims{Audience: []string{resource}}))
	b.ReportAllocs()
	for b.Loop() {
		if v := a.Check(h, false); v.Reason != auth.ReasonBadSignature {
			b.Fatal(v.Reason)
		}
	}
}

func benchCheck(b *testing.B, a *auth.Authenticator, h []byte) {
	if v := a.Check(h, false); !v.OK() {
		b.Fatalf("%+v", v)
	}
	b.SetBytes(int64(len(h)))
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if v := a.Check(h, false); !v.OK() {
				b.Fatal(v.Reason)
			}
		}
	})
}
