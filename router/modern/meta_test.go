package modern

import (
	"bytes"
	"testing"

	"github.com/mcprouter/mcprouter/codec"
)

func TestReadMeta(t *testing.T) {
	for _, tc := range []struct {
		name, params             string
		present                  bool
		version, caps, info, lvl string
		flags                    Capability
	}{
		{"none", `{}`, false, "", "", "", "", 0},
		{"not an object", `{"_meta":[1]}`, false, "", "", "", "", 0},
		{"full", `{"x":1,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"roots":{},"elicitation":{"form":{}},"extensions":{"io.modelcontextprotocol/tasks":{}}},"io.modelcontextprotocol/clientInfo":{"name":"n"},"io.modelcontextprotocol/logLevel":"debug"}}`,
			true, "2026-07-28", `{"roots":{},"elicitation":{"form":{}},"extensions":{"io.modelcontextprotocol/tasks":{}}}`, `{"name":"n"}`, "debug", CapRoots | CapElicitation | CapTasks},
		{"version of the wrong type", `{"_meta":{"io.modelcontextprotocol/protocolVersion":20260728,"io.modelcontextprotocol/clientCapabilities":{}}}`, true, "", "{}", "", "", 0},
		{"escaped key", `{"_meta":{"io.modelcontextprotocol\/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"sampling":true}}}`, true, "2026-07-28", `{"sampling":true}`, "", "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var m Meta
			ReadMeta([]byte(tc.params), &m)
			if m.Present != tc.present || string(m.Version) != tc.version || string(m.Capabilities) != tc.caps ||
				string(m.ClientInfo) != tc.info || string(m.LogLevel) != tc.lvl || m.Caps != tc.flags {
				t.Errorf("got %+v", m)
			}
		})
	}
}

func TestClaimed(t *testing.T) {
	var withKey, without Meta
	ReadMeta([]byte(`{"_meta":{"io.modelcontextprotocol/protocolVersion":"v999.0.0"}}`), &withKey)
	ReadMeta([]byte(`{"name":"x"}`), &without)
	for _, tc := range []struct {
		m      *Meta
		header string
		want   bool
	}{
		{&withKey, "", true},           // an unknown version in _meta is still a modern request (-32022)
		{&without, "2026-07-28", true}, // the header alone claims it (then -32602: no _meta)
		{&without, "2099-01-01", true},
		{&without, "2025-11-25", false},
		{&without, "", false},
		{&without, "garbage", false},
	} {
		if got := tc.m.Claimed([]byte(tc.header)); got != tc.want {
			t.Errorf("Claimed(%q) with %+v = %v", tc.header, tc.m, got)
		}
	}
}

func TestAppendCapabilities(t *testing.T) {
	for c, want := range map[Capability]string{
		0:                         `{}`,
		CapSampling:               `{"sampling":{}}`,
		CapRoots | CapElicitation: `{"roots":{},"elicitation":{}}`,
		CapSampling | CapTasks:    `{"sampling":{},"extensions":{"io.modelcontextprotocol/tasks":{}}}`,
		CapTasks:                  `{"extensions":{"io.modelcontextprotocol/tasks":{}}}`,
	} {
		got := string(AppendCapabilities(nil, c))
		if got != want {
			t.Errorf("%b: %s, want %s", c, got, want)
		}
		if ReadCapabilities([]byte(got)) != c {
			t.Errorf("%b does not read back", c)
		}
	}
}

func TestLogLevelIndex(t *testing.T) {
	if LogLevelIndex([]byte("debug")) != 0 || LogLevelIndex([]byte("emergency")) != 7 || LogLevelIndex([]byte("loud")) != -1 {
		t.Error("log level indexes")
	}
}

// refReadMeta is ReadMeta as plainly as it can be written, finding _meta and then
// walking its members and the capabilities' (passing over them more than once): what
// the fuzz test holds ReadMeta's single walk to.
func refReadMeta(params []byte) Meta {
	var m Meta
	meta := codec.Member(params, "_meta")
	if !isObject(meta) {
		return m
	}
	m.Present = true
	eachMember(meta, func(k, v []byte) bool {
		switch {
		case codec.KeyIs(k, KeyProtocolVersion):
			m.versionSeen = true
			if s, ok := stringContents(v); ok {
				m.Version = s
			}
		case codec.KeyIs(k, KeyClientCapabilities):
			m.capsSeen = true
			if isObject(v) {
				m.Capabilities, m.Caps = v, ReadCapabilities(v)
			}
		case codec.KeyIs(k, KeyClientInfo):
			m.ClientInfo = v
		case codec.KeyIs(k, KeyLogLevel):
			if s, ok := stringContents(v); ok {
				m.LogLevel = s
			}
		}
		return true
	})
	return m
}

func sameMeta(a, b *Meta) bool {
	return a.Present == b.Present && a.versionSeen == b.versionSeen && a.capsSeen == b.capsSeen && a.Caps == b.Caps &&
		bytes.Equal(a.Version, b.Version) && bytes.Equal(a.Capabilities, b.Capabilities) &&
		bytes.Equal(a.ClientInfo, b.ClientInfo) && bytes.Equal(a.LogLevel, b.LogLevel) &&
		(a.Version == nil) == (b.Version == nil) && (a.LogLevel == nil) == (b.LogLevel == nil)
}
