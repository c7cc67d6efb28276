package modern

import (
	"encoding/json"
	"testing"

	"github.com/mcprouter/mcprouter/codec"
)

// scan scans a message or fails the test.
func scan(t testing.TB, msg string) (*codec.Message, []byte) {
	t.Helper()
	b := []byte(msg)
	var m codec.Message
	if err := codec.Scan(b, &m); err != nil {
		t.Fatalf("scan %s: %v", msg, err)
	}
	return &m, b
}

// decode parses JSON into a generic value or fails the test (tests only: the package
// itself never builds a tree).
func decode(t testing.TB, b []byte) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("invalid JSON %s: %v", b, err)
	}
	return v
}

const validMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"sampling":{}},"io.modelcontextprotocol/clientInfo":{"name":"c","version":"1"}}`

func call(tool string) string {
	return `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"` + tool + `","arguments":{"text":"hi"},` + validMeta + `}}`
}

func headers(method, name string) *Headers {
	h := &Headers{Version: []byte(Version), Method: []byte(method)}
	if name != "" {
		h.Name = []byte(name)
	}
	return h
}
