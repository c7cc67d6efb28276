package policy

import (
	"encoding/json"
	"hash/maphash"
	"slices"
	"sync/atomic"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"

	"github.com/mcprouter/mcprouter/transport/auth"
)

// Subject is a principal prepared for policy: its CEL values, built once, and its
// fingerprint, the key of its list view. The router makes one per principal it sees
// (per token: a refreshed token may carry other scopes) and keeps it with the session;
// it outlives policy reloads. A Subject is immutable (but for the memo of its view) and
// safe for concurrent use.
type Subject struct {
	id     string // auth.Principal.ID: the limits' principal key
	sub    ref.Val
	iss    ref.Val
	scopes ref.Val
	claims ref.Val
	// fp identifies everything the rules may read of the principal; two principals
	// with the same fp see the same lists. 128 bits: a collision would show one
	// principal another's list (calls are always decided afresh).
	fp fingerprint
	// fpNoClaims is fp without the claims, the view key when no rule reads claims (a
	// JWT's iat and jti would otherwise give every token its own view).
	fpNoClaims fingerprint
	// views remembers the subject's view in the cache of the engine that last decided
	// for it (viewCache.viewOf).
	views atomic.Pointer[viewMemo]
}

type fingerprint [2]uint64

// seeds of the fingerprints: fixed per process (views are never shared between
// processes), read-only after init.
var fpSeeds = [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}

// Anonymous is the subject of a request without a principal (authentication off):
// principal.sub is "", no scopes, no claims.
var Anonymous = NewSubject(nil)

// NewSubject prepares p; nil is the anonymous principal.
func NewSubject(p *auth.Principal) *Subject {
	var sub, iss string
	var scopes []string
	var claims map[string]any
	if p != nil {
		sub, iss, claims = p.Subject, p.Issuer, p.Claims
		scopes = slices.Clone(p.Scopes)
	}
	if scopes == nil {
		scopes = []string{}
	}
	if claims == nil {
		claims = map[string]any{}
	}
	s := &Subject{
		id:     p.ID(),
		sub:    types.String(sub),
		iss:    types.String(iss),
		scopes: types.NewStringList(types.DefaultTypeAdapter, scopes),
		claims: types.DefaultTypeAdapter.NativeToValue(claims),
	}
	sorted := slices.Clone(scopes)
	slices.Sort(sorted)
	// Claims come from a verified JWT (JSON), so they marshal; map keys come out
	// sorted, which makes the bytes canonical.
	cj, err := json.Marshal(claims)
	if err != nil {
		cj = []byte(err.Error()) // cannot happen for decoded JSON; still a stable value
	}
	for i, seed := range fpSeeds {
		var h maphash.Hash
		h.SetSeed(seed)
		for _, f := range [...]string{sub, iss} {
			h.WriteString(f)
			h.WriteByte(0)
		}
		for _, sc := range sorted {
			h.WriteString(sc)
			h.WriteByte(0)
		}
		s.fpNoClaims[i] = h.Sum64()
		h.WriteByte(1)
		h.Write(cj)
		s.fp[i] = h.Sum64()
	}
	return s
}

// ID is the principal's identity (auth.Principal.ID), "" for the anonymous one.
func (s *Subject) ID() string { return s.id }

// view is the key of the subject's list view under rules that read u.
func (s *Subject) view(u uses) fingerprint {
	if u&useClaims != 0 {
		return s.fp
	}
	return s.fpNoClaims
}

// SubjectMemo holds the Subject of one session's current principal, so that a
// session makes a Subject once per token rather than once per request: the transport
// keeps one *auth.Principal per token presented. The zero value is ready; safe for
// concurrent use.
type SubjectMemo struct{ last atomic.Pointer[memo] }

type memo struct {
	p *auth.Principal
	s *Subject
}

// Get returns p's Subject, made again only when p is another principal value than the
// last one asked about.
func (m *SubjectMemo) Get(p *auth.Principal) *Subject {
	if c := m.last.Load(); c != nil && c.p == p {
		return c.s
	}
	s := NewSubject(p)
	m.last.Store(&memo{p, s})
	return s
}
