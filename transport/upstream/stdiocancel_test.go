package upstream

import (
	"bytes"
	"slices"
	"sort"
	"strconv"
	"testing"

	"github.com/mcprouter/mcprouter/codec"
)

// TestUnanswered: requests are kept until answered or cancelled by the router, and
// the cancellations written at Close name exactly those left, each id as it was sent.
func TestUnanswered(t *testing.T) {
	var u unanswered
	for _, msg := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a"}}`,
		`{"jsonrpc":"2.0","id":20,"method":"tools/call","params":{"name":"a"}}`,
		`{"jsonrpc":"2.0","id":"s-1","method":"tools/call","params":{"name":"a"}}`,
		`{"jsonrpc":"2.0","id":-3,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":30,"method":"ping"}`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":30}}`,
		`{"jsonrpc":"2.0","id":5,"result":{}}`, // the answer to the child's own request
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
	} {
		var m codec.Message
		if err := codec.Scan([]byte(msg), &m); err != nil {
			t.Fatal(err)
		}
		u.sent(&m)
	}
	u.answered([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}`))
	u.answered([]byte(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":20}}`))
	lines := bytes.Split(bytes.TrimSpace(u.appendCancels(nil)), []byte("\n"))
	var ids []string
	for _, l := range lines {
		var m codec.Message
		if err := codec.Scan(l, &m); err != nil || !isMethod(&m, "notifications/cancelled") {
			t.Fatalf("%s: not a cancellation (%v)", l, err)
		}
		ids = append(ids, string(m.RequestID))
	}
	sort.Strings(ids)
	if got, want := ids, []string{`"s-1"`, "-3", "20"}; !slices.Equal(got, want) {
		t.Fatalf("cancelled %q, want %q", got, want)
	}
}

// TestUnansweredBounded: beyond maxUnanswered, requests are no longer kept.
func TestUnansweredBounded(t *testing.T) {
	var u unanswered
	for i := 0; i < maxUnanswered+10; i++ {
		u.add(strconv.AppendInt(nil, int64(i), 10))
	}
	if n := u.n.Load(); n != maxUnanswered {
		t.Fatalf("%d kept, want %d", n, maxUnanswered)
	}
}

// BenchmarkUnanswered is the booking a stdio call costs: its scan and id kept on the
// way to the child, its answer's id peeked and dropped on the way back.
func BenchmarkUnanswered(b *testing.B) {
	var u unanswered
	var hs handshake
	reply := []byte(`{"jsonrpc":"2.0","id":12345,"result":{"content":[{"type":"text","text":"hello"}]}}`)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		var m codec.Message
		hs.scan(benchCall, &m)
		u.sent(&m)
		u.answered(reply)
	}
}
