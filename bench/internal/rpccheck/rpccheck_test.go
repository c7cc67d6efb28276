package rpccheck

import (
	"errors"
	"strings"
	"testing"

	"github.com/mcprouter/mcprouter/codec"
)

func TestResult(t *testing.T) {
	for _, tc := range []struct {
		body, id string
		want     string // "" for no error, else a substring of it
	}{
		{`{"jsonrpc":"2.0","id":1,"result":{}}`, `1`, ""},
		{`{"jsonrpc":"2.0","result":{"content":[]},"id":"a-1"}`, `"a-1"`, ""},
		{`{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"Method not found"}}`, `1`, "error response"},
		{`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}`, `1`, "error response"},
		{`{"jsonrpc":"2.0","id":2,"result":{}}`, `1`, "id 2, want 1"},
		{`{"jsonrpc":"2.0","id":"1","result":{}}`, `1`, `id "1", want 1`},
		{`{"jsonrpc":"2.0","method":"notifications/progress","params":{}}`, `1`, "a notification"},
		{`{"jsonrpc":"2.0","id":1,"result":{}`, `1`, "not the expected"},
		{`overloaded`, `1`, "not the expected"},
		{``, `1`, "not the expected"},
	} {
		var m codec.Message
		err := Result(&m, []byte(tc.body), []byte(tc.id))
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.body, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, ErrNotResult)):
			t.Errorf("%s: error %v, want one mentioning %q", tc.body, err, tc.want)
		}
	}
}

func TestResultAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under -race")
	}
	var m codec.Message
	body, id := []byte(`{"jsonrpc":"2.0","id":42,"result":{"content":[{"type":"text","text":"benchmark payload"}]}}`), []byte(`42`)
	if n := testing.AllocsPerRun(100, func() { _ = Result(&m, body, id) }); n != 0 {
		t.Errorf("%v allocs per checked answer, want 0", n)
	}
}
