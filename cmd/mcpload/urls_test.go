package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// --url repeated or with commas gives the instances of one service; given over a
// scenario, it replaces the scenario's instead of adding to them.
func TestSeveralURLs(t *testing.T) {
	sc := filepath.Join(t.TempDir(), "s.yaml")
	if err := os.WriteFile(sc, []byte("target:\n  url: http://127.0.0.1:1/mcp\n  urls: [http://127.0.0.1:2/mcp]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		args []string
		url  string
		urls []string
	}{
		{[]string{"--url", "http://a/mcp", "--url", "http://b/mcp,http://c/mcp"}, "http://a/mcp", []string{"http://b/mcp", "http://c/mcp"}},
		{[]string{"--url", "http://a/mcp"}, "http://a/mcp", nil},
		{[]string{"--scenario", sc}, "http://127.0.0.1:1/mcp", []string{"http://127.0.0.1:2/mcp"}},
		{[]string{"--scenario", sc, "--url", "http://a/mcp", "--url", "http://b/mcp"}, "http://a/mcp", []string{"http://b/mcp"}},
	}
	for _, tt := range tests {
		var f loadFlags
		fs := newLoadFlagSet(&f, &bytes.Buffer{})
		if err := fs.Parse(tt.args); err != nil {
			t.Fatal(err)
		}
		cfg, _, err := buildConfig(&f, fs)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Target.URL != tt.url || !slices.Equal(cfg.Target.URLs, tt.urls) {
			t.Errorf("%v: url %q urls %q, want %q %q", tt.args, cfg.Target.URL, cfg.Target.URLs, tt.url, tt.urls)
		}
	}
}

// --source-addrs expands ranges, and a scenario keeps the flag's value.
func TestSourceAddrsFlag(t *testing.T) {
	sc := filepath.Join(t.TempDir(), "s.yaml")
	if err := os.WriteFile(sc, []byte("target:\n  url: http://127.0.0.1:1/mcp\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	want := []string{"127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.1.1"}
	for _, args := range [][]string{
		{"--url", "http://a/mcp", "--source-addrs", "127.0.0.2-127.0.0.4,127.0.1.1"},
		{"--scenario", sc, "--source-addrs", "127.0.0.2-127.0.0.4,127.0.1.1"},
	} {
		var f loadFlags
		fs := newLoadFlagSet(&f, &bytes.Buffer{})
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		cfg, _, err := buildConfig(&f, fs)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(cfg.Target.SourceAddrs, want) {
			t.Errorf("%v: source addresses %v, want %v", args, cfg.Target.SourceAddrs, want)
		}
	}
	var f loadFlags
	if err := newLoadFlagSet(&f, &bytes.Buffer{}).Parse([]string{"--source-addrs", "127.0.0.9-127.0.0.2"}); err == nil {
		t.Error("a backwards range was accepted")
	}
}
