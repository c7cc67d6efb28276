package auth

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"golang.org/x/time/rate"

	"github.com/mcprouter/mcprouter/internal/ctxtime"
)

// Key refresh policy.
const (
	// keyRefreshPeriod is how often the JWKS is fetched in the background: keys the
	// provider dropped stop verifying within this period.
	keyRefreshPeriod = 5 * time.Minute
	// keyFetchTimeout bounds one JWKS fetch.
	keyFetchTimeout = 10 * time.Second
	// keyWait bounds how long a request with an unknown kid waits for the fetch it
	// triggered: the first token signed by a new key waits once, the rest find it.
	keyWait = 5 * time.Second
	// maxJWKSBytes bounds the JWKS document.
	maxJWKSBytes = 1 << 20
	// maxKeyWaiters bounds the requests waiting for a fetch an unknown kid started. Made-up
	// kids cost an attacker nothing; while the issuer is slow or down, each would hold a
	// connection for keyWait. Past the bound, a request is answered at once: the keys are
	// being fetched, retry (503).
	maxKeyWaiters = 64
)

// keyRefreshLimit is how many fetches unknown kids may trigger: a burst for a rotation
// (or two) in quick succession, then one per interval, so that tokens with made-up kids
// cannot turn the router into a client that hammers the provider.
var keyRefreshLimit = struct {
	every time.Duration
	burst int
}{5 * time.Second, 3}

// errKeysUnavailable: the JWKS could not be fetched and the kid is not among the keys
// held (or none are held).
var errKeysUnavailable = errors.New("auth: signing keys unavailable")

// keySet is one fetched JWKS, read without locks on the hot path.
type keySet struct {
	byKID map[string][]jose.JSONWebKey
	all   []jose.JSONWebKey
}

// keyring holds the provider's public keys: fetched at start, refreshed in the background
// every keyRefreshPeriod, and at once (rate limited) when a token names a kid it does not
// hold, which is how a key rotation shows up.
type keyring struct {
	url    string
	client *http.Client
	log    *slog.Logger
	// onDrop runs when a refresh removes a key: verified tokens signed by it must be
	// verified again (and fail).
	onDrop func()

	set     atomic.Pointer[keySet]
	limiter *rate.Limiter
	wait    time.Duration // keyWait (tests set it before the first lookup)

	mu       sync.Mutex
	inflight chan struct{} // closed when the fetch under way ends
	lastErr  error         // of the last fetch
	waiters  atomic.Int32  // requests of unknown kids waiting in refresh (maxKeyWaiters)

	// ctx ends at close: it cancels the fetch under way and the waits on it.
	ctx     context.Context
	cancel  context.CancelFunc
	fetches sync.WaitGroup // the fetch goroutines, waited for by close
	done    chan struct{}  // closed when the background loop ends
}

func newKeyring(ctx context.Context, url string, client *http.Client, log *slog.Logger, onDrop func()) (*keyring, error) {
	k := &keyring{
		url:     url,
		client:  client,
		log:     log,
		onDrop:  onDrop,
		limiter: rate.NewLimiter(rate.Every(keyRefreshLimit.every), keyRefreshLimit.burst),
		wait:    keyWait,
		done:    make(chan struct{}),
	}
	k.ctx, k.cancel = context.WithCancel(context.WithoutCancel(ctx))
	set, err := k.fetch(ctx)
	if err != nil {
		return nil, err
	}
	k.set.Store(set)
	go k.background()
	return k, nil
}

// lookup returns the keys that may have signed a token with this kid and alg. An
// unknown kid joins the fetch under way, or starts one if the rate limit allows, and
// waits for it.
func (k *keyring) lookup(kid string, alg string) ([]jose.JSONWebKey, error) {
	if keys := k.set.Load().candidates(kid, alg); len(keys) > 0 {
		return keys, nil
	}
	if err := k.refresh(true); err != nil {
		return nil, err
	}
	return k.set.Load().candidates(kid, alg), nil
}

func (s *keySet) candidates(kid, alg string) []jose.JSONWebKey {
	if kid != "" {
		return s.byKID[kid]
	}
	// No kid: every key of a type that can carry the algorithm (a provider with one key
	// often names none).
	var out []jose.JSONWebKey
	for _, key := range s.all {
		if key.Algorithm == "" || key.Algorithm == alg {
			out = append(out, key)
		}
	}
	return out
}

// refresh fetches the JWKS, joining a fetch already under way, and waits at most keyWait.
// A limited refresh (an unknown kid) starts a fetch only if keyRefreshLimit allows; when
// it does not, the keys held are the answer. At most maxKeyWaiters limited refreshes
// wait; the others get errKeysUnavailable at once.
func (k *keyring) refresh(limited bool) error {
	if limited {
		if k.waiters.Add(1) > maxKeyWaiters {
			k.waiters.Add(-1)
			return errKeysUnavailable
		}
		defer k.waiters.Add(-1)
	}
	k.mu.Lock()
	if k.ctx.Err() != nil { // closed
		k.mu.Unlock()
		return errKeysUnavailable
	}
	ch := k.inflight
	if ch == nil {
		if limited && !k.limiter.Allow() {
			k.mu.Unlock()
			return nil
		}
		ch = make(chan struct{})
		k.inflight = ch
		k.fetches.Add(1)
		go k.run(ch)
	}
	k.mu.Unlock()
	t := time.NewTimer(k.wait)
	defer t.Stop()
	select {
	case <-ch:
		k.mu.Lock()
		defer k.mu.Unlock()
		if k.lastErr != nil {
			return errKeysUnavailable
		}
		return nil
	case <-t.C:
		return errKeysUnavailable
	case <-k.ctx.Done():
		return errKeysUnavailable
	}
}

// run is one fetch; it replaces the key set when the fetch succeeds.
func (k *keyring) run(ch chan struct{}) {
	defer k.fetches.Done()
	ctx, cancel := context.WithTimeout(k.ctx, keyFetchTimeout)
	defer cancel()
	set, err := k.fetch(ctx)
	if err == nil {
		old := k.set.Swap(set)
		k.report(old, set)
	} else {
		k.log.Warn("auth: JWKS refresh failed; keeping the keys held", "url", k.url, "err", err)
	}
	k.mu.Lock()
	k.lastErr = err
	k.inflight = nil
	k.mu.Unlock()
	close(ch)
}

// report logs the keys a refresh added and removed, and purges verified tokens when a key
// was removed. A key counts as removed when the new set does not hold it, whatever its
// kid: a kid published again with other key material (a provider that reuses kids) drops
// the old key as surely as a kid that disappears.
func (k *keyring) report(old, cur *keySet) {
	var added, removed []string
	for kid, keys := range cur.byKID {
		if !holdsAll(old.byKID[kid], keys) {
			added = append(added, kid)
		}
	}
	for kid, keys := range old.byKID {
		if !holdsAll(cur.byKID[kid], keys) {
			removed = append(removed, kid)
		}
	}
	if len(added) > 0 || len(removed) > 0 {
		k.log.Info("auth: signing keys rotated", "added", added, "removed", removed)
	}
	if len(removed) > 0 && k.onDrop != nil {
		k.onDrop()
	}
}

// holdsAll reports whether every key of want is in have (same public key).
func holdsAll(have, want []jose.JSONWebKey) bool {
	for _, w := range want {
		if !slices.ContainsFunc(have, func(h jose.JSONWebKey) bool { return samePublicKey(h.Key, w.Key) }) {
			return false
		}
	}
	return true
}

// samePublicKey compares the public keys a JWKS may hold (parseKeySet keeps no others).
func samePublicKey(a, b any) bool {
	type equaler interface{ Equal(crypto.PublicKey) bool }
	e, ok := a.(equaler)
	return ok && e.Equal(b)
}

func (k *keyring) background() {
	defer close(k.done)
	ctxtime.Every(k.ctx.Done(), keyRefreshPeriod, func() { k.refresh(false) })
}

// close stops the background refresh and waits for the fetch under way to end.
func (k *keyring) close() {
	k.mu.Lock()
	k.cancel() // under mu: no fetch starts after it
	k.mu.Unlock()
	<-k.done
	k.fetches.Wait()
}

// fetch reads the JWKS. Keys of unknown types, encryption keys and symmetric keys are
// skipped (a JWKS is public: an "oct" key in it would be a secret anyone can read); a
// document without one usable signing key is an error.
func (k *keyring) fetch(ctx context.Context) (*keySet, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, k.url, nil)
	if err != nil {
		return nil, fmt.Errorf("auth: JWKS %s: %w", k.url, err)
	}
	req.Header.Set("Accept", "application/json, application/jwk-set+json")
	resp, err := k.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("auth: JWKS: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("auth: JWKS %s: %s", k.url, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxJWKSBytes+1))
	if err != nil {
		return nil, fmt.Errorf("auth: JWKS %s: %w", k.url, err)
	}
	if len(body) > maxJWKSBytes {
		return nil, fmt.Errorf("auth: JWKS %s: larger than %d bytes", k.url, maxJWKSBytes)
	}
	return parseKeySet(body)
}

func parseKeySet(body []byte) (*keySet, error) {
	var raw struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		return nil, fmt.Errorf("auth: JWKS: %w", err)
	}
	set := &keySet{byKID: make(map[string][]jose.JSONWebKey, len(raw.Keys))}
	for _, r := range raw.Keys {
		var key jose.JSONWebKey
		if err := key.UnmarshalJSON(r); err != nil {
			continue
		}
		if key.Use != "" && key.Use != "sig" {
			continue
		}
		switch key.Key.(type) {
		case *rsa.PublicKey, *ecdsa.PublicKey, ed25519.PublicKey:
		default:
			continue
		}
		set.all = append(set.all, key)
		set.byKID[key.KeyID] = append(set.byKID[key.KeyID], key)
	}
	if len(set.all) == 0 {
		return nil, errors.New("auth: JWKS holds no usable signing key (RSA, EC or Ed25519 public key)")
	}
	return set, nil
}
