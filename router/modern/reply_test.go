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

// TestAppendPlainDecorated: a reply written the common way, with none of the members
// the decoration depends on, is decorated without a walk into what ReadReply and
// AppendDecorated make of it; any other is left to them.
func TestAppendPlainDecorated(t *testing.T) {
	for _, tc := range []struct {
		msg, id string
		plain   bool
	}{
		{`{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"hello"}],"structuredContent":{"text":"hello"}}}`, `7`, true},
		{`{"jsonrpc":"2.0","id":"a-1","result":{}}`, `"a-1"`, true},
		{`{"jsonrpc":"2.0","id":1,"result":{ }}`, `1`, true},
		{`{"jsonrpc":"2.0","id":1,"result":{ "a":[{}],"b":"meta"}}`, `1`, true},
		{`{"jsonrpc":"2.0","id":1,"result":{"b":"_meta"}}`, `1`, false}, // a value too, to be sure
		{`{"jsonrpc":"2.0","id":"_meta","result":{"a":1}}`, `"_meta"`, true},
		{`{"jsonrpc":"2.0","id":7,"result":{"a":1}}`, `8`, false},      // another request's id
		{`{"jsonrpc":"2.0","id":70,"result":{"a":1}}`, `7`, false},     // nor one it begins
		{`{"jsonrpc":"2.0","id":1,"result":{"_meta":{}}}`, `1`, false}, // members the walk decides on
		{`{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete"}}`, `1`, false},
		{`{"jsonrpc":"2.0","id":1,"result":{"inputRequests":{},"requestState":"s"}}`, `1`, false},
		{`{"jsonrpc":"2.0","id":1,"result":{"a":{"_meta":1}}}`, `1`, false}, // anywhere
		{`{"jsonrpc":"2.0","id":1,"result":{"\u005fmeta":{}}}`, `1`, false}, // a key written with escapes
		{`{"jsonrpc":"2.0","id":1,"result":{"t":"a\"b"}}`, `1`, false},
		{`{"jsonrpc":"2.0","id":1,"result":[1]}`, `1`, false},
		{`{"jsonrpc": "2.0","id":1,"result":{}}`, `1`, false},
		{`{"id":1,"jsonrpc":"2.0","result":{}}`, `1`, false},
		{`{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"x"}}`, `1`, false},
		// A 2026-07-28 backend's: its serverInfo replaced.
		{`{"jsonrpc":"2.0","id":7,"result":{"resultType":"complete","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"mcpbackend","version":"dev"}},"content":[{"type":"text","text":"}{"}]}}`, `7`, true},
		{`{"jsonrpc":"2.0","id":7,"result":{"resultType":"complete","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"b","x":[{"y":{}}]}}}}`, `7`, true},
		{`{"jsonrpc":"2.0","id":7,"result":{"resultType":"complete","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"b"},"k":1},"a":1}}`, `7`, false},
		{`{"jsonrpc":"2.0","id":7,"result":{"resultType":"complete","_meta":{"io.modelcontextprotocol/serverInfo":"b"},"a":1}}`, `7`, false},
		{`{"jsonrpc":"2.0","id":7,"result":{"resultType":"complete","_meta":{"io.modelcontextprotocol/serverInfo":{}},"a":{"_meta":1}}}`, `7`, false},
		{`{"jsonrpc":"2.0","id":7,"result":{"resultType":"input_required","_meta":{"io.modelcontextprotocol/serverInfo":{}},"a":1}}`, `7`, false},
	} {
		var m codec.Message
		if err := codec.Scan([]byte(tc.msg), &m); err != nil {
			t.Fatalf("%s: %v", tc.msg, err)
		}
		if plain := samePlainDecorated(t, []byte(tc.msg), []byte(tc.id)); plain != tc.plain {
			t.Errorf("%s (id %s): decorated without a walk: %v, want %v", tc.msg, tc.id, plain, tc.plain)
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

// TestObjectEnd: objectEnd agrees with a walk of every byte (objectEndBytewise) on
// objects, unterminated ones and what is no object, at every start.
func TestObjectEnd(t *testing.T) {
	for _, s := range []string{
		`{"name":"b","version":"1"}`, `{"a":[1,{"b":"}]"}],"c":{}},"rest":1}`, `{}`, `{"a":"{"`, `{"a":"x"`,
		`{"a":[}`, `{"a":"]}"}`, `[1,2]`, `"str"`, ``, `{"a":{"b":{"c":"d"}}}}`, `{"unterminated`,
	} {
		b := []byte(s)
		for at := 0; at <= len(b); at++ {
			if got, want := objectEnd(b, at), objectEndBytewise(b, at); got != want {
				t.Errorf("objectEnd(%s, %d) = %d, want %d", s, at, got, want)
			}
		}
	}
}
