package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/mcprouter/mcprouter/internal/testwait"
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

// TestKeyWaitersBounded: while a JWKS fetch started by an unknown kid hangs, at most
// maxKeyWaiters requests wait for it; the next is answered at once (keys unavailable,
// retry) instead of holding its connection too.
func TestKeyWaitersBounded(t *testing.T) {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	jwks, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: priv.Public(), KeyID: "k1", Use: "sig"}}})
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	var served atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if served.Add(1) > 1 { // the first fetch is New's; the next ones hang
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
		w.Write(jwks)
	}))
	defer srv.Close()
	k, err := newKeyring(context.Background(), srv.URL, srv.Client(), slog.New(slog.DiscardHandler), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer k.close()
	k.wait = time.Minute // a request that waits would outlast the test's bounds
	var wg sync.WaitGroup
	for range maxKeyWaiters {
		wg.Go(func() { k.lookup("made-up", "ES256") })
	}
	testwait.For(t, "the waiters to queue on the hung fetch", 10*time.Second, func() bool {
		return k.waiters.Load() == maxKeyWaiters && served.Load() == 2
	})
	extra := make(chan error, 1)
	go func() {
		_, err := k.lookup("made-up-too", "ES256")
		extra <- err
	}()
	if err := testwait.Recv(t, "the answer past the bound (before the hung fetch times out)", keyFetchTimeout/2, extra); err != errKeysUnavailable {
		t.Fatalf("request past the bound: %v, want errKeysUnavailable", err)
	}
	close(release) // the fetch ends: the waiters get their answer
	wg.Wait()
}
