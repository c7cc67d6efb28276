package natsbus

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"runtime"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/internal/testsize"
)

// BenchmarkRecordCost measures what the embedded JetStream holds per session record in
// the memory store (live heap after a collection, per session), for the record and key
// shapes a router may write: the JSON record of a client like mcpload keyed by its
// 32-character session id (what the previous build wrote), the binary record of the
// same session (59 bytes: its client's bytes in a shared blob), a shorter key, an empty
// value (JetStream's own cost of a message), and the sessions' binary records packed 64
// to a message (one key per page of sessions: what a store of pages would hold), the
// store's own pages (ids it named, written in the record writer's batches of 256; the
// figure includes the router's copy of its pages, also reported alone as
// ownerB/session), and the binary record in file storage (read once the file store's
// caches went idle).
// The server runs in this process, so its heap is ours to measure.
func BenchmarkRecordCost(b *testing.B) {
	const n = 20000
	jsonRec := []byte(`{"v":"2025-11-25","caps":{"roots":{}},"info":{"name":"mcpload","version":"0.1.0"},"subs":[["backend","memo://board"]]}`)
	binary := make([]byte, 59)
	cases := []struct {
		name    string
		rec     []byte
		key     func([]byte) string
		perPage int    // sessions per message
		storage string // the bucket's storage ("": memory)
		paged   bool   // ids from the store, saved in batches (SaveAll)
	}{
		{"json_hexkey", jsonRec, hex.EncodeToString, 1, "", false},
		{"binary_hexkey", binary, hex.EncodeToString, 1, "", false},
		{"binary_b64key", binary, base64.RawURLEncoding.EncodeToString, 1, "", false},
		{"empty_hexkey", nil, hex.EncodeToString, 1, "", false},
		{"binary_pages_of_64", bytes.Repeat(binary, 64), hex.EncodeToString, 64, "", false},
		{"binary_store_pages", binary, nil, 1, "", true},
		{"binary_hexkey_file", binary, hex.EncodeToString, 1, "file", false},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				cfg := Config{}
				if c.storage != "" {
					cfg.StoreDir = b.TempDir()
					cfg.JetStream.SessionStorage = c.storage
				}
				bus, err := Start(cfg, quietLog)
				if err != nil {
					b.Fatal(err)
				}
				s, err := bus.Sessions(time.Hour)
				if err != nil {
					b.Fatal(err)
				}
				keys := make([]string, n/c.perPage)
				for k := range keys {
					if c.paged {
						keys[k] = s.NewID()
						continue
					}
					var id [16]byte
					rand.Read(id[:])
					keys[k] = c.key(id[:])
				}
				before := testsize.LiveHeap()
				if c.paged {
					savePaged(b, s, keys, c.rec)
				}
				for _, k := range keys {
					if c.paged {
						break
					}
					if err := s.Save(k, c.rec); err != nil {
						b.Fatal(err)
					}
				}
				if c.storage == "file" {
					// The file store keeps the blocks it wrote cached until they
					// have been idle a while; what it holds for good is read after.
					time.Sleep(fileCacheIdle)
				}
				after := testsize.LiveHeap()
				// The ids were counted in before: they stay until after (else the figure
				// was lower by their 48 bytes a session, below zero for the pages).
				runtime.KeepAlive(keys)
				b.ReportMetric((float64(after)-float64(before))/n, "heapB/session")
				if c.paged { // the NATS server's part alone, without the store's copy
					for i := range s.pages.pages {
						s.pages.pages[i].buf = nil
					}
					b.ReportMetric((float64(testsize.LiveHeap())-float64(before))/n, "serverB/session")
					runtime.KeepAlive(keys)
				}
				bus.Close()
			}
		})
	}
}

// savePaged saves rec under every key in batches of 256, as the record writer does,
// and reports the bytes of the store's own copy of its pages per session.
func savePaged(b *testing.B, s *SessionStore, keys []string, rec []byte) {
	recs := make([][]byte, 256)
	for i := range recs {
		recs[i] = rec
	}
	for i := 0; i < len(keys); i += len(recs) {
		batch := keys[i:min(i+len(recs), len(keys))]
		for _, err := range s.SaveAll(batch, recs[:len(batch)]) {
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	own := 0
	for _, pg := range s.pages.pages {
		own += cap(pg.buf)
	}
	b.ReportMetric(float64(own)/float64(len(keys)), "ownerB/session")
}

// fileCacheIdle is longer than the file store keeps an idle block's cache.
const fileCacheIdle = 15 * time.Second
