package modern

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/codec"
)

// FuzzCheck: any message codec.Scan accepts is read and judged without a panic, a
// rejection is a well-formed error response with a status of 400 or 404, and a result
// object that is valid JSON stays valid JSON once decorated.
func FuzzCheck(f *testing.F) {
	for _, s := range []string{
		call("echo"),
		`{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{` + validMeta + `}}`,
		`{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"x","io.modelcontextprotocol/clientCapabilities":{"sampling":{}}}}}`,
		`{"jsonrpc":"2.0","id":"a","method":"resources/read","params":{"uri":"a\"b",` + validMeta + `}}`,
		`{"jsonrpc":"2.0","id":2,"result":{"_meta":{ },"ttlMs":1}}`,
		`{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"hello"}],"structuredContent":{"text":"hello"}}}`,
		`{"jsonrpc":"2.0","id":"q","result":{ }}`,
		`{"jsonrpc":"2.0","id":7,"result":{"resultType":"complete","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"b","v":[{}]}},"content":[]}}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}},"roots":1},` +
			`"io.modelcontextprotocol/clientCapabilities":7,"io.modelcontextprotocol/protocolVersion":"v","io.modelcontextprotocol/protocolVersion":1,"io.modelcontextprotocol/logLevel":"info"},"_meta":[]}}`,
	} {
		f.Add([]byte(s), []byte("2026-07-28"), []byte("tools/call"), []byte("=?base64?ZWNobw==?="))
	}
	f.Fuzz(func(t *testing.T, msg, hv, hm, hn []byte) {
		var m codec.Message
		if codec.Scan(msg, &m) != nil {
			return
		}
		var meta Meta
		ReadMeta(m.Params, &meta)
		if ref := refReadMeta(m.Params); !sameMeta(&meta, &ref) {
			t.Fatalf("ReadMeta(%s) = %+v, the member by member reading says %+v", m.Params, meta, ref)
		}
		var of Meta
		ReadMetaOf(&m, &of)
		if !sameMeta(&of, &meta) {
			t.Fatalf("ReadMetaOf(%s) = %+v, ReadMeta of its params says %+v", msg, of, meta)
		}
		_ = meta.Claimed(hv)
		for _, h := range []*Headers{nil, {Version: hv, Method: hm, Name: hn}} {
			r := checker.Check(&m, &meta, h)
			if r.OK() {
				continue
			}
			if r.Status != 400 && r.Status != 404 {
				t.Fatalf("status %d", r.Status)
			}
			if out := r.AppendError(nil, m.ID, checker.Supported); !json.Valid(out) {
				t.Fatalf("invalid error response %s", out)
			}
		}
		if m.Kind == codec.KindRequest {
			if out := AppendWithMeta(nil, msg, &m, fields); !json.Valid(out) {
				t.Fatalf("_meta added to %s: invalid %s", msg, out)
			}
			out := AppendRetry(nil, msg, &m, []byte(`"r"`), []byte(`{"k":{}}`), []byte(`"st"`))
			var back codec.Message
			if codec.Scan(out, &back) != nil || string(RequestState(back.Params)) != "st" || InputResponse(back.Params, "k") == nil {
				t.Fatalf("retry of %s: %s", msg, out)
			}
			if out := AppendRetry(nil, msg, &m, []byte(`"r"`), []byte(`{}`), nil); !json.Valid(out) || RequestStateOf(out) != nil {
				t.Fatalf("retry without state of %s: %s", msg, out)
			}
		}
		if m.Result != nil {
			for _, replace := range []bool{false, true} {
				d := Decoration{ServerInfo: serverInfo, ReplaceInfo: replace, Cache: &Cache{TTLms: 1}}
				if out := AppendDecorated(nil, m.Result, &d); !json.Valid(out) {
					t.Fatalf("decorated %s into invalid %s", m.Result, out)
				}
			}
			_ = ReadCache(m.Result)
		}
		var r Reply
		if ReadReply(msg, &r); m.Kind == codec.KindResult && r.Kind == codec.KindResult {
			d := Decoration{ServerInfo: serverInfo, ReplaceInfo: true, Cache: &Cache{TTLms: 1}}
			if got, want := r.AppendDecorated(nil, msg, &d), decoratedByScan(msg, &m, &d); string(got) != string(want) {
				t.Fatalf("read reply of %s decorated into %s, want %s", msg, got, want)
			}
		}
		if m.Kind == codec.KindResult {
			samePlainDecorated(t, msg, m.ID)
		}
	})
}

// samePlainDecorated fails t when AppendPlainDecorated decorates msg (a scanned result
// with the request id id) otherwise than ReadReply and AppendDecorated do.
//
// plain reports whether the router's decoration (its serverInfo, replacing) was made
// without a walk.
func samePlainDecorated(t *testing.T, msg, id []byte) (plain bool) {
	t.Helper()
	for i, d := range []Decoration{{ServerInfo: serverInfo, ReplaceInfo: true}, {ServerInfo: serverInfo}, {}} {
		got, ok := AppendPlainDecorated([]byte("x"), msg, id, &d)
		if i == 0 {
			plain = ok
		}
		if !ok {
			if string(got) != "x" {
				t.Fatalf("%s: not decorated, but appended %s", msg, got)
			}
			continue
		}
		var r Reply
		ReadReply(msg, &r)
		if want := r.AppendDecorated([]byte("x"), msg, &d); r.Kind != codec.KindResult || string(got) != string(want) {
			t.Fatalf("%s: plainly decorated into\n%s\nwant\n%s", msg, got, want)
		}
	}
	return plain
}

// FuzzEncodedEquals: the quantum-by-quantum comparison agrees with decoding the whole
// value first.
func FuzzEncodedEquals(f *testing.F) {
	f.Add([]byte("=?base64?SGVsbG8=?="), []byte("Hello"))
	f.Add([]byte("=?base64?SGVsbG8?="), []byte("Hello"))
	f.Add([]byte("plain"), []byte("plain"))
	f.Fuzz(func(t *testing.T, header, want []byte) {
		match, valid := EncodedEquals(header, want)
		if !bytes.HasPrefix(header, []byte(b64Prefix)) || !bytes.HasSuffix(header, []byte(b64Suffix)) || len(header) < len(b64Prefix)+len(b64Suffix) {
			if !valid || match != bytes.Equal(header, want) {
				t.Fatalf("literal %q vs %q: %v %v", header, want, match, valid)
			}
			return
		}
		enc := header[len(b64Prefix) : len(header)-len(b64Suffix)]
		if bytes.ContainsAny(enc, "\r\n") {
			if valid {
				t.Fatalf("%q: line breaks accepted", header)
			}
			return // the stdlib decoder skips them; a header value has none
		}
		dec, err := base64.StdEncoding.Strict().DecodeString(string(enc))
		if (err == nil) != valid {
			t.Fatalf("%q: valid %v, decoder says %v", header, valid, err)
		}
		if valid && match != bytes.Equal(dec, want) {
			t.Fatalf("%q vs %q: match %v", header, want, match)
		}
	})
}

// FuzzOpen: arbitrary bytes never open, and never panic.
func FuzzOpen(f *testing.F) {
	s, _ := testSealer(f)
	m, _ := scan(f, call("x"))
	req := RequestDigest(m)
	f.Add([]byte(s.Seal([]byte("p"), "alice", req, time.Minute)))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, state []byte) {
		if p, err := s.Open(state, "alice", req); err == nil && string(p) != "p" {
			t.Fatalf("opened a forged state: %q", p)
		}
	})
}

// RequestStateOf scans msg and returns its params.requestState (tests).
func RequestStateOf(msg []byte) []byte {
	var m codec.Message
	if codec.Scan(msg, &m) != nil {
		return []byte("invalid")
	}
	if codec.Member(m.Params, "requestState") != nil {
		return []byte("present")
	}
	return nil
}
