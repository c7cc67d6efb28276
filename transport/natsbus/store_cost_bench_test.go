package natsbus

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"runtime"
	"testing"
	"time"
)

// BenchmarkRecordCost measures what the embedded JetStream holds per session record in
// the memory store (live heap after a collection, per record), for the record and key
// shapes a router may write: the JSON record of a client like mcpload keyed by its
// 32-character session id, a compact record, and a shorter key. The server runs in
// this process, so its heap is ours to measure.
func BenchmarkRecordCost(b *testing.B) {
	const n = 20000
	jsonRec := []byte(`{"v":"2025-11-25","caps":{"roots":{}},"info":{"name":"mcpload","version":"0.1.0"},"subs":[["backend","memo://board"]]}`)
	compact := make([]byte, 26)
	cases := []struct {
		name string
		rec  []byte
		key  func([]byte) string
	}{
		{"json_hexkey", jsonRec, hex.EncodeToString},
		{"compact_hexkey", compact, hex.EncodeToString},
		{"compact_b64key", compact, base64.RawURLEncoding.EncodeToString},
		{"empty_hexkey", nil, hex.EncodeToString},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				bus, err := Start(Config{}, quietLog)
				if err != nil {
					b.Fatal(err)
				}
				s, err := bus.Sessions(time.Hour)
				if err != nil {
					b.Fatal(err)
				}
				keys := make([]string, n)
				for k := range keys {
					var id [16]byte
					rand.Read(id[:])
					keys[k] = c.key(id[:])
				}
				before := heapInUse()
				for _, k := range keys {
					if err := s.Save(k, c.rec); err != nil {
						b.Fatal(err)
					}
				}
				after := heapInUse()
				b.ReportMetric(float64(after-before)/n, "heapB/record")
				bus.Close()
			}
		})
	}
}

func heapInUse() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
