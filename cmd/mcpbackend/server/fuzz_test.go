package server

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/router/modern"
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
			checkEnding(t, b, &m, r)
		}
	})
}

// checkEnding checks the contract of one served message b (scanned into m) with its
// Responder r: exactly one Reply or Done and nothing after it, only valid JSON that the
// codec reads on the wire, and a request's reply under the request's id.
func checkEnding(t *testing.T, b []byte, m *codec.Message, r *recorder) {
	t.Helper()
	r.wait(t)
	r.mu.Lock()
	n, late := len(r.replies)+r.dones, r.afterEnd
	msgs := append(append([][]byte(nil), r.replies...), r.sends...)
	replied := len(r.replies) == 1
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
	if m.Kind == codec.KindRequest && replied {
		var out codec.Message
		codec.Scan(msgs[0], &out) // the replies come first
		if string(out.ID) != string(m.ID) {
			t.Fatalf("%s: reply id %s, want %s", b, out.ID, m.ID)
		}
	}
}

// FuzzServeModern feeds any message the codec accepts to the 2026-07-28 side, as a
// connection transport would (stdio, NATS): a request that passes the checks is served
// with exactly one Reply or Done and valid JSON out, with the request's id; one that
// fails them gets an error with its id.
func FuzzServeModern(f *testing.F) {
	seedsFrom(f, "messages")
	const meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"sampling":{}},"io.modelcontextprotocol/logLevel":"debug"}`
	for _, seed := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{` + meta + `}}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"sample","arguments":{"prompt":"p"},` + meta + `}}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"sample","arguments":{"prompt":"p"},"requestState":"AAAA","inputResponses":{"sample":{}},` + meta + `}}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"progress","arguments":{"steps":2,"intervalMs":0},` + meta + `}}`,
		`{"jsonrpc":"2.0","id":5,"method":"resources/read","params":{"uri":"nope://","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`,
		`{"jsonrpc":"2.0","id":6,"method":"tools/list","params":{"cursor":"x",` + meta + `}}`,
	} {
		f.Add([]byte(seed))
	}
	s := newTestServer(f, Config{MaxSleep: 20 * time.Millisecond, SampleTimeout: 5 * time.Millisecond, MaxPayload: 4096, MaxSteps: 50, ExtraTools: 3, PageSize: 2})
	f.Fuzz(func(t *testing.T, b []byte) {
		var m codec.Message
		if codec.Scan(b, &m) != nil || m.Kind != codec.KindRequest {
			return
		}
		var meta modern.Meta
		if !s.claimsModern(&m, &meta, nil) {
			return
		}
		r := newRecorder()
		if rej := s.mod.checker.Check(&m, &meta, nil); !rej.OK() {
			r.Reply(rej.AppendError(nil, m.ID, s.Supported()))
		} else if string(m.Method) == "subscriptions/listen" {
			return // it ends when the client goes: TestModernListen
		} else {
			s.serveModern(&m, &meta, s.requestSession(&meta), r)
		}
		checkEnding(t, b, &m, r)
	})
}
