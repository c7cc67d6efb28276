package fleet

import (
	"testing"

	"github.com/mcprouter/mcprouter/router/modern"
)

// TestListCache: a merged list is as fresh as its stalest part, across backends and
// across the pages of one backend, and public only when every part is.
func TestListCache(t *testing.T) {
	a, b := &backend{}, &backend{}
	cb := &catalogBuilder{set: new(backendSet)}
	cb.set.store([]*backend{a, b})
	if got := cb.listCache([]byte("tools/list")); got != (modern.Cache{}) {
		t.Errorf("nothing listed: %+v, want ttlMs 0 and private", got)
	}
	cb.noteCache(a, kTools, 0, []byte(`{"tools":[],"ttlMs":60000,"cacheScope":"public"}`))
	if got := cb.listCache([]byte("tools/list")); got != (modern.Cache{TTLms: 60000, Scope: modern.ScopePublic}) {
		t.Errorf("one public part: %+v", got)
	}
	cb.noteCache(a, kTools, 1, []byte(`{"tools":[],"ttlMs":30000,"cacheScope":"public"}`))
	cb.noteCache(b, kTools, 0, []byte(`{"tools":[],"ttlMs":45000,"cacheScope":"public"}`))
	if got := cb.listCache([]byte("tools/list")); got != (modern.Cache{TTLms: 30000, Scope: modern.ScopePublic}) {
		t.Errorf("smallest ttl of the pages and backends: %+v", got)
	}
	cb.noteCache(b, kTools, 0, []byte(`{"tools":[]}`)) // a 2025 backend says nothing
	if got := cb.listCache([]byte("tools/list")); got != (modern.Cache{}) {
		t.Errorf("a part that said nothing: %+v, want ttlMs 0 and private", got)
	}
	cb.noteCache(a, kTools, 0, []byte(`{"tools":[],"ttlMs":10,"cacheScope":"public"}`)) // a new first page starts over
	cb.noteCache(b, kTools, 0, []byte(`{"tools":[],"ttlMs":20,"cacheScope":"private"}`))
	if got := cb.listCache([]byte("tools/list")); got != (modern.Cache{TTLms: 10, Scope: modern.ScopePrivate}) {
		t.Errorf("a private part: %+v, want private", got)
	}
	if got := cb.listCache([]byte("prompts/list")); got != (modern.Cache{}) {
		t.Errorf("another kind: %+v", got)
	}
}

// TestListenMessages: the acknowledgement names only what is honoured, every message
// carries the subscription id, and only the list changes asked for are wanted.
func TestListenMessages(t *testing.T) {
	l := &clientListener{id: []byte(`"sub-1"`), tools: true, resources: true}
	if got, want := string(l.ack()), `{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":"sub-1"},"notifications":{"toolsListChanged":true,"resourcesListChanged":true}}}`; got != want {
		t.Errorf("ack\n got %s\nwant %s", got, want)
	}
	if got, want := string(l.completion()), `{"resultType":"complete","_meta":{"io.modelcontextprotocol/subscriptionId":"sub-1"}}`; got != want {
		t.Errorf("completion\n got %s\nwant %s", got, want)
	}
	for method, want := range map[string]bool{
		"notifications/tools/list_changed":     true,
		"notifications/prompts/list_changed":   false,
		"notifications/resources/list_changed": true,
		"notifications/resources/updated":      false,
	} {
		if l.wants(method) != want {
			t.Errorf("wants(%s) = %v", method, !want)
		}
	}
	none := &clientListener{id: []byte("7")}
	if got, want := string(none.ack()), `{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":7},"notifications":{}}}`; got != want {
		t.Errorf("nothing honoured\n got %s\nwant %s", got, want)
	}
}

// TestStripModernMeta: a 2026-07-28 client's request goes to a 2025 backend without the
// revision's _meta keys; its progress token and its own keys stay.
func TestStripModernMeta(t *testing.T) {
	cases := []struct{ in, want string }{
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","progressToken":7,"io.modelcontextprotocol/clientCapabilities":{"sampling":{}},"x.example/k":"v"}}}`,
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","_meta":{"progressToken":7,"x.example/k":"v"}}}`},
		{`{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`,
			`{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"_meta":{}}}`},
		{`{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"_meta":{"progressToken":1}}}`,
			`{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"_meta":{"progressToken":1}}}`},
		{`{"jsonrpc":"2.0","id":4,"method":"tools/list"}`, `{"jsonrpc":"2.0","id":4,"method":"tools/list"}`},
	}
	for _, tc := range cases {
		if got := string(stripModernMeta(nil, []byte(tc.in))); got != tc.want {
			t.Errorf("got  %s\nwant %s", got, tc.want)
		}
	}
}
