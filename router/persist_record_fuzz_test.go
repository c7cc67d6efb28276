package router

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// FuzzDecodeRecord: a record read from the store is whatever bytes the store holds
// (another build's, a damaged one's): decoding never panics, and a binary record that
// decodes is written back (inline) to the same record.
func FuzzDecodeRecord(f *testing.F) {
	rec := record{Version: V20250618, Capabilities: []byte(testCaps), ClientInfo: []byte(testInfo),
		Subs: [][2]string{{"files", "file:///a"}}, Principal: "alice"}
	f.Add(appendRecord(nil, &rec, ""))
	f.Add(appendRecord(nil, &rec, "0123456789abcdefghijkl"))
	f.Add(appendRecord(nil, &record{Version: V20251125}, ""))
	f.Add([]byte(`{"v":"2025-06-18","caps":{},"subs":[["files","file:///a"]],"p":"alice"}`))
	f.Add([]byte("\x02\x05ab"))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := decodeRecord(b, nil) // no blobs: a shared record reads as none
		if err != nil || b[0] == '{' {
			return
		}
		again, err := decodeRecord(appendRecord(nil, &got, ""), nil)
		if err != nil {
			t.Fatalf("record %q decoded to %+v, which does not decode once written: %v", b, got, err)
		}
		if d := cmp.Diff(got, again); d != "" {
			t.Fatalf("record %q written back decodes otherwise (-first +again):\n%s", b, d)
		}
	})
}
