package authtest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"fmt"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/google/uuid"
)

// key is one signing key of the provider (or a stranger's, for negative tests).
type key struct {
	id   string
	alg  jose.SignatureAlgorithm
	priv crypto.Signer
}

func newKey(alg jose.SignatureAlgorithm) (*key, error) {
	var (
		priv crypto.Signer
		err  error
	)
	switch alg {
	case jose.RS256, jose.RS384, jose.RS512, jose.PS256, jose.PS384, jose.PS512:
		priv, err = rsa.GenerateKey(rand.Reader, 2048)
	case jose.ES256:
		priv, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case jose.ES384:
		priv, err = ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	case jose.EdDSA:
		_, priv, err = ed25519.GenerateKey(rand.Reader)
	default:
		return nil, fmt.Errorf("authtest: no key for algorithm %s", alg)
	}
	if err != nil {
		return nil, fmt.Errorf("authtest: generate %s key: %w", alg, err)
	}
	return &key{id: uuid.NewString(), alg: alg, priv: priv}, nil
}

// op.SigningKey
func (k *key) SignatureAlgorithm() jose.SignatureAlgorithm { return k.alg }
func (k *key) Key() any                                    { return k.priv }
func (k *key) ID() string                                  { return k.id }

// publicKey is a key as the JWKS publishes it (op.Key).
type publicKey struct{ k *key }

func (p publicKey) ID() string                         { return p.k.id }
func (p publicKey) Algorithm() jose.SignatureAlgorithm { return p.k.alg }
func (p publicKey) Use() string                        { return "sig" }
func (p publicKey) Key() any                           { return p.k.priv.Public() }

// RotateOptions shape a key rotation.
type RotateOptions struct {
	// Algorithm of the new key; default that of the current signing key.
	Algorithm jose.SignatureAlgorithm
	// DropOld removes every older key from the JWKS at once (a compromised key), so the
	// tokens they signed stop verifying; by default they stay published (a graceful
	// rotation: old tokens verify until they expire).
	DropOld bool
}

// Rotate publishes a new key and signs every later token with it. It returns the new
// key's id (the kid of the tokens it signs).
func (p *Provider) Rotate(o RotateOptions) string {
	p.tb.Helper()
	s := p.store
	s.mu.Lock()
	alg := s.signing.alg
	s.mu.Unlock()
	if o.Algorithm != "" {
		alg = o.Algorithm
	}
	k, err := newKey(alg)
	if err != nil {
		p.tb.Fatalf("authtest: rotate: %v", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.signing = k
	if o.DropOld {
		s.keys = []*key{k}
	} else {
		s.keys = append(s.keys, k)
	}
	return k.id
}

// KeyID is the kid of the current signing key.
func (p *Provider) KeyID() string {
	p.store.mu.Lock()
	defer p.store.mu.Unlock()
	return p.store.signing.id
}

func (p *Provider) signingKey() *key {
	p.store.mu.Lock()
	defer p.store.mu.Unlock()
	return p.store.signing
}
