package server

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/codec"
)

// FuzzServe feeds any message the codec accepts to an initialized session and checks the
// contract with the transport: exactly one Reply or Done, nothing after it, and only
// valid JSON on the wire.
func FuzzServe(f *testing.F) {
	seedsFrom(f, "messages")
	// Short bounds so that timed tools end quickly whatever the input asks.
	s := newTestServer(f, Config{MaxSleep: 20 * time.Millisecond, SampleTimeout: 5 * time.Millisecond, MaxPayload: 4096, MaxSteps: 50, ExtraTools: 3, ExtraResources: 2, PageSize: 2})
	sessions := map[string]*Session{}
	for _, v := range []string{"2024-11-05", "2025-06-18"} {
		sessions[v], _ = openSession(f, s, v, `{"sampling":{}}`)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var m codec.Message
		if codec.Scan(b, &m) != nil {
			return
		}
		for _, sess := range sessions {
			r := newRecorder()
			s.Serve(&m, sess, r)
			r.wait(t)
			r.mu.Lock()
			n, late := len(r.replies)+r.dones, r.afterEnd
			msgs := append(append([][]byte(nil), r.replies...), r.sends...)
			r.mu.Unlock()
			if n != 1 || late != 0 {
				t.Fatalf("%s: %d endings and %d late calls", b, n, late)
			}
			for _, msg := range msgs {
				if !json.Valid(msg) {
					t.Fatalf("%s: invalid JSON out: %s", b, msg)
				}
				var out codec.Message
				if err := codec.Scan(msg, &out); err != nil {
					t.Fatalf("%s: the codec refuses what the server sent: %v: %s", b, err, msg)
				}
			}
			if m.Kind == codec.KindRequest && len(r.replies) == 1 {
				var out codec.Message
				codec.Scan(r.replies[0], &out)
				if string(out.ID) != string(m.ID) {
					t.Fatalf("%s: reply id %s, want %s", b, out.ID, m.ID)
				}
			}
		}
	})
}
