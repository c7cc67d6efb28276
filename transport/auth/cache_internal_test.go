package auth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// TestPutAfterPurge: a verification that looked its key up before a purge (the key was
// dropped while it verified) does not store its token after the purge.
func TestPutAfterPurge(t *testing.T) {
	c := newTokenCache(16)
	now := time.Now()
	p := &Principal{Subject: "alice", Token: "a.b.c"}
	gen := c.generation()
	c.purge() // a refresh dropped the key the verification used
	c.put(p, now.Add(time.Minute), gen)
	if got := c.get([]byte(p.Token), now); got != nil {
		t.Fatal("a token verified with a dropped key was stored after the purge")
	}
	c.put(p, now.Add(time.Minute), c.generation())
	if got := c.get([]byte(p.Token), now); got != p {
		t.Fatal("a token verified after the purge was not stored")
	}
}

// TestKeyReplacedUnderSameKID: a JWKS that publishes a kid again with another key drops
// the old key: tokens verified with it are purged.
func TestKeyReplacedUnderSameKID(t *testing.T) {
	set := func(kid string) *keySet {
		t.Helper()
		priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: priv.Public(), KeyID: kid, Use: "sig", Algorithm: "ES256"}}})
		if err != nil {
			t.Fatal(err)
		}
		s, err := parseKeySet(b)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	var drops int
	k := &keyring{log: slog.New(slog.DiscardHandler), onDrop: func() { drops++ }}
	first := set("k1")
	k.report(first, first)
	if drops != 0 {
		t.Fatalf("the same set: %d drops", drops)
	}
	k.report(first, set("k1"))
	if drops != 1 {
		t.Fatalf("kid k1 with another key: %d drops, want 1", drops)
	}
}
