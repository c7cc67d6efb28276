package modern

import (
	"testing"

	"github.com/mcprouter/mcprouter/codec"
)

func TestHTTPStatus(t *testing.T) {
	for code, want := range map[int]int{0: 200, codec.CodeMethodNotFound: 404, codec.CodeHeaderMismatch: 400,
		codec.CodeMissingCapability: 400, codec.CodeUnsupportedVersion: 400, codec.CodeInvalidParams: 200, codec.CodeInternalError: 200} {
		if got := HTTPStatus(code); got != want {
			t.Errorf("HTTPStatus(%d) = %d, want %d", code, got, want)
		}
	}
}

func TestProbeEra(t *testing.T) {
	for _, tc := range []struct {
		resp string
		want Era
	}{
		{`{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","supportedVersions":["2025-11-25","2026-07-28"],"capabilities":{}}}`, EraModern},
		{`{"jsonrpc":"2.0","id":1,"result":{"supportedVersions":["2025-11-25"]}}`, EraLegacy},
		{`{"jsonrpc":"2.0","id":1,"error":{"code":-32022,"message":"x","data":{"supported":["2026-09-01"],"requested":"2026-07-28"}}}`, EraModern},
		{`{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"Method not found"}}`, EraLegacy},
		{`{"jsonrpc":"2.0","id":1,"error":{"code":-32600,"message":"session not initialized"}}`, EraLegacy},
		{`{"jsonrpc":"2.0","method":"x"}`, EraUnknown},
	} {
		m, _ := scan(t, tc.resp)
		if got := ProbeEra(m); got != tc.want {
			t.Errorf("%s: era %d, want %d", tc.resp, got, tc.want)
		}
	}
	m, _ := scan(t, `{"jsonrpc":"2.0","id":1,"error":{"code":-32022,"message":"x","data":{"supported":["2026-09-01","2025-11-25"],"requested":"2026-07-28"}}}`)
	var got []string
	SupportedVersions(m, func(v []byte) bool { got = append(got, string(v)); return true })
	if len(got) != 2 || got[0] != "2026-09-01" {
		t.Errorf("supported %v", got)
	}
}
