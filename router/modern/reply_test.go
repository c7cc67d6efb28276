package modern

import (
	"testing"

	"github.com/mcprouter/mcprouter/codec"
)

// TestReadReply: one walk of a response gives what a scan and the result's own walks
// gave: its kind, error, result type, caching fields and decorated bytes.
func TestReadReply(t *testing.T) {
	d := Decoration{ServerInfo: serverInfo, ReplaceInfo: true, Cache: &Cache{TTLms: 3}}
	for _, tc := range []struct {
		msg  string
		kind codec.Kind
	}{
		{`{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"hello"}],"structuredContent":{"text":"hello"}}}`, codec.KindResult},
		{`{"jsonrpc":"2.0","id":"a","result":{"resultType":"complete","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"b"}},"ttlMs":70,"cacheScope":"public","contents":[]}}`, codec.KindResult},
		{`{"jsonrpc":"2.0","id":1,"result":{"content":[],"inputRequests":{"a":{"method":"roots/list"}},"requestState":"s"}}`, codec.KindResult},
		{`{"result" : { "\u0074tlMs" : 5 , "_meta" : { } } , "id" : 2 , "jsonrpc" : "2.0"}`, codec.KindResult},
		{`{"jsonrpc":"2.0","id":1,"result":{}}`, codec.KindResult},
		{`{"jsonrpc":"2.0","id":1,"result":[1,2]}`, codec.KindResult},
		{`{"jsonrpc":"2.0","id":1,"error":{"code":-32002,"message":"Resource not found"}}`, codec.KindError},
		{`{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"x"},"result":{}}`, codec.KindInvalid},
		{`{"jsonrpc":"2.0","id":1,"result":{},"result":{}}`, codec.KindInvalid},
		{`{"jsonrpc":"2.0","id":1,"result":{"a":}}`, codec.KindInvalid},
		{`{"jsonrpc":"2.0","method":"notifications/message","params":{}}`, codec.KindInvalid},
		{`[{"jsonrpc":"2.0","id":1,"result":{}}]`, codec.KindInvalid},
	} {
		msg := []byte(tc.msg)
		var r Reply
		ReadReply(msg, &r)
		if r.Kind != tc.kind {
			t.Errorf("%s: kind %v, want %v", msg, r.Kind, tc.kind)
			continue
		}
		var m codec.Message
		if codec.Scan(msg, &m) != nil || m.Kind != r.Kind {
			continue
		}
		if string(r.Error) != string(m.Error) || string(r.Result) != string(m.Result) {
			t.Errorf("%s: error %s result %s, want %s and %s", msg, r.Error, r.Result, m.Error, m.Result)
		}
		if r.Kind != codec.KindResult {
			continue
		}
		if got, want := string(r.ResultType()), string(ReadResultType(m.Result)); got != want {
			t.Errorf("%s: result type %s, want %s", msg, got, want)
		}
		if got, want := r.Cache(), ReadCache(m.Result); got != want {
			t.Errorf("%s: cache %+v, want %+v", msg, got, want)
		}
		if got, want := string(r.AppendDecorated([]byte("x"), msg, &d)), "x"+string(decoratedByScan(msg, &m, &d)); got != want {
			t.Errorf("%s: decorated\n%s\nwant\n%s", msg, got, want)
		}
	}
}

// decoratedByScan is the response m (msg scanned) with its result decorated, the way
// the router's screen made it before ReadReply.
func decoratedByScan(msg []byte, m *codec.Message, d *Decoration) []byte {
	at := cap(msg) - cap(m.Result)
	out := append([]byte(nil), msg[:at]...)
	out = AppendDecorated(out, m.Result, d)
	return append(out, msg[at+len(m.Result):]...)
}
