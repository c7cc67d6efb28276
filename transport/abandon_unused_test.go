package transport

import "testing"

// unusedCounter is an UnusedAbandoner that counts what ran.
type unusedCounter struct{ abandoned, unused int }

func (u *unusedCounter) Abandon() { u.abandoned++ }
func (u *unusedCounter) Unused()  { u.unused++ }

// TestAbandonUnused: of an UnusedAbandoner, exactly one of Abandon and Unused runs, once:
// Unused when the request is answered with its client there, Abandon (and never Unused)
// when the client left first; a leaving after the answer runs nothing.
func TestAbandonUnused(t *testing.T) {
	msg := []byte(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"t"}}`)
	for _, leaves := range []bool{false, true} {
		u := &unusedCounter{}
		var got *Exchange
		r, err := ServeRelayed(handlerFunc(func(x *Exchange) { got = x; x.OnAbandonBy(u) }), msg, nil, &relayRecorder{})
		if err != nil {
			t.Fatal(err)
		}
		if leaves {
			r.Abandon()
		}
		got.Reply([]byte(`{"jsonrpc":"2.0","id":3,"result":{}}`))
		r.Abandon()
		want := unusedCounter{unused: 1}
		if leaves {
			want = unusedCounter{abandoned: 1}
		}
		if *u != want {
			t.Errorf("client leaves first %v: %+v, want %+v", leaves, *u, want)
		}
	}
}
