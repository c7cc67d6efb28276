package auth

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"strings"
	"sync/atomic"
)

// staticTokens are the bearer tokens of mode bearer: only their SHA-256 is held.
type staticTokens struct {
	entries []staticEntry
}

type staticEntry struct {
	sum    [sha256.Size]byte
	proto  Principal                 // Subject and Scopes; Token is set on first use
	filled atomic.Pointer[Principal] // proto with Token, once a request presented it
}

func newStaticTokens(tokens []BearerToken, endpoint string) *staticTokens {
	s := &staticTokens{entries: make([]staticEntry, len(tokens))}
	for i, t := range tokens {
		hex.Decode(s.entries[i].sum[:], []byte(strings.ToLower(t.SHA256))) // Validate checked it
		s.entries[i].proto = Principal{Subject: t.Principal, Scopes: t.Scopes, Endpoint: endpoint}
	}
	return s
}

// check finds the token's principal. Every stored digest is compared, in constant time
// and without stopping at a match, so the time taken tells nothing about which digest
// (or how much of one) matched.
func (s *staticTokens) check(token []byte) *Principal {
	sum := sha256.Sum256(token)
	match := -1
	for i := range s.entries {
		eq := subtle.ConstantTimeCompare(sum[:], s.entries[i].sum[:])
		match = subtle.ConstantTimeSelect(eq, i, match)
	}
	if match < 0 {
		return nil
	}
	e := &s.entries[match]
	if p := e.filled.Load(); p != nil {
		return p
	}
	// The digest identifies the token, so the Principal with its Token is built once and
	// shared by every later request.
	p := e.proto
	p.Token = string(token)
	e.filled.CompareAndSwap(nil, &p)
	return e.filled.Load()
}
