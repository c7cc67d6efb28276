package fleet

import (
	"testing"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/router"
)

// TestBelowLevel: a backend's log message reaches a 2025 session when it is at or above
// the level the session set, or when the session set none; other notifications always.
func TestBelowLevel(t *testing.T) {
	k := &connector{}
	set, unset := new(router.Session), new(router.Session)
	k.setLevel(set, "warning")
	for _, tc := range []struct {
		s     *router.Session
		msg   string
		below bool
	}{
		{set, `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}}`, true},
		{set, `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"warning","data":"x"}}`, false},
		{set, `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"error","data":"x"}}`, false},
		{set, `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"loud","data":"x"}}`, false},
		{set, `{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"x"}}`, false},
		{set, `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}`, false},
		{unset, `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"debug","data":"x"}}`, false},
		{nil, `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"debug","data":"x"}}`, false},
	} {
		var m codec.Message
		if err := codec.Scan([]byte(tc.msg), &m); err != nil {
			t.Fatal(err)
		}
		if got := k.belowLevel(tc.s, &m); got != tc.below {
			t.Errorf("%s (level set: %v): below %v, want %v", tc.msg, tc.s == set, got, tc.below)
		}
	}
}
