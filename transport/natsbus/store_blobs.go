package natsbus

import (
	"context"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// clientBlobs keeps the blobs that session records share (the capabilities and
// clientInfo of every client of one kind: router.blobStore) in the P_clients bucket.
//
// When a blob goes: nobody deletes one; each ages out of the bucket blobTTL after its
// last write. A router writes a blob again when a record it writes refers to it and
// its own last write of it is refresh old, so a blob written at tb is in the bucket
// until tb+blobTTL = tb+2·ttl, past the end (t+ttl) of any record a router wrote at t
// < tb+refresh referring to it. Blobs no record refers to any more are gone 2·ttl after
// the last such record was written.
type clientBlobs struct {
	kv      jetstream.KeyValue
	refresh time.Duration
	timeout time.Duration

	mu      sync.Mutex
	byKey   map[string]*blobState // the blobs records of this router have carried
	onError func()                // counts a failed write or read
}

// blobState is what this router knows of one blob it has seen: when its last write of
// it that succeeded started (zero: never written).
type blobState struct {
	written time.Time
}

// maxBlobs bounds the table of blobs one router tracks: the kinds of clients in
// use are few, but a client may send capabilities no other sends. A full table is
// emptied (its blobs are written again as they come back).
const maxBlobs = 1024

// openClientBlobs opens the blob bucket beside a sessions bucket of ttl; nil when the
// server will not make it (records then carry their client's bytes themselves).
func (b *Bus) openClientBlobs(ctx context.Context, ttl time.Duration, storage jetstream.StorageType, onError func()) *clientBlobs {
	kv, err := b.keyValue(ctx, "clients", 2*ttl, 0, storage)
	if err != nil && b.JS != nil {
		kv, err = b.JS.KeyValue(ctx, b.cfg.Prefix+"_clients")
	}
	if err != nil {
		return nil
	}
	return &clientBlobs{kv: kv, refresh: ttl / 2, timeout: 5 * time.Second, byKey: map[string]*blobState{}, onError: onError}
}

// Share implements router.blobStore: the first record of a kind of client carries the
// bytes itself, so that a client whose capabilities nobody shares costs one message,
// not two; from the second on the blob is written (or known to be recent enough) and
// the record refers to it.
func (c *clientBlobs) Share(key string, blob []byte) bool {
	if c == nil || !validKey(key) {
		return false
	}
	now := time.Now()
	c.mu.Lock()
	e := c.byKey[key]
	if e == nil {
		if len(c.byKey) >= maxBlobs {
			c.byKey = map[string]*blobState{}
		}
		c.byKey[key] = &blobState{}
		c.mu.Unlock()
		return false
	}
	fresh := !e.written.IsZero() && now.Sub(e.written) < c.refresh
	c.mu.Unlock()
	if fresh {
		return true
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	if _, err := c.kv.Put(ctx, key, blob); err != nil {
		c.onError()
		return false
	}
	c.mu.Lock()
	if now.After(e.written) {
		e.written = now
	}
	c.mu.Unlock()
	return true
}

// LoadBlob implements router.blobStore.
func (c *clientBlobs) LoadBlob(key string) ([]byte, bool) {
	if c == nil || !validKey(key) {
		return nil, false
	}
	return getTwice(c.kv, key, c.timeout, c.onError)
}
