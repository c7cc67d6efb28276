package main

import (
	"bytes"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/mcprouter/mcprouter/cmd/mcprouter/app"
)

// TestCheckPrintsResolved: a valid file prints the configuration with its defaults
// applied, which reads back as the same configuration.
func TestCheckPrintsResolved(t *testing.T) {
	p := writeConfig(t, "listen: 127.0.0.1:9000\nbackends:\n  - name: a\n    url: http://127.0.0.1:1/mcp\n")
	var out, errOut bytes.Buffer
	if rc := check([]string{"--config", p}, &out, &errOut); rc != 0 {
		t.Fatalf("check = %d, stderr %q", rc, errOut.String())
	}
	var got app.Config
	if err := yaml.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("output does not read back: %v\n%s", err, out.String())
	}
	want, err := app.LoadConfig(p)
	if err != nil {
		t.Fatal(err)
	}
	want.Defaults()
	if got.Listen != "127.0.0.1:9000" || got.Sessions.Max != want.Sessions.Max || got.Backends[0].Timeout != want.Backends[0].Timeout || got.Backends[0].Timeout == 0 {
		t.Errorf("resolved configuration lost its values or defaults:\n%s", out.String())
	}
}

// TestCheckNamesTheBadKey: an invalid file exits non-zero with the key in the message
// and prints nothing on stdout.
func TestCheckNamesTheBadKey(t *testing.T) {
	for _, tc := range []struct{ body, key string }{
		{"listen: nope\n", "listen"},
		{"sessions:\n  max: -1\n", "sessions.max"},
		{"no_such_key: 1\n", "no_such_key"},
	} {
		var out, errOut bytes.Buffer
		if rc := check([]string{"--config", writeConfig(t, tc.body)}, &out, &errOut); rc == 0 {
			t.Errorf("check(%q) = 0", tc.body)
		}
		if !strings.Contains(errOut.String(), tc.key) || out.Len() != 0 {
			t.Errorf("check(%q): stderr %q (want the key %q), stdout %q", tc.body, errOut.String(), tc.key, out.String())
		}
	}
	var out, errOut bytes.Buffer
	if rc := check(nil, &out, &errOut); rc != 2 || !strings.Contains(errOut.String(), "usage") {
		t.Errorf("check without --config = %d, %q", rc, errOut.String())
	}
}
