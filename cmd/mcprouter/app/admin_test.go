package app

import (
	"strings"
	"testing"
)

func TestAdminConfig(t *testing.T) {
	cases := []struct {
		name, yaml string
		want       string // admin.listen after defaults, or the error's start
		enabled    bool
		implicit   bool
		err        bool
	}{
		{name: "default", yaml: "", want: "127.0.0.1:8081", enabled: true, implicit: true},
		{name: "ephemeral follows MCP", yaml: "listen: 127.0.0.1:0", want: "127.0.0.1:0", enabled: true, implicit: true},
		{name: "explicit", yaml: "admin:\n  listen: 0.0.0.0:9100\n  pprof: true", want: "0.0.0.0:9100", enabled: true},
		{name: "off", yaml: "admin:\n  listen: off", want: "off"},
		{name: "not an address", yaml: "admin:\n  listen: nine", err: true, want: "admin.listen"},
		{name: "same as MCP", yaml: "listen: 127.0.0.1:9000\nadmin:\n  listen: 127.0.0.1:9000", err: true, want: "admin.listen"},
		{name: "unknown key", yaml: "admin:\n  port: 1", err: true, want: "config"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := ParseConfig([]byte(c.yaml))
			if c.err {
				if err == nil || !strings.Contains(err.Error(), c.want) {
					t.Fatalf("error %v, want one about %s", err, c.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			a := cfg.Admin
			if a.Listen != c.want || a.Enabled() != c.enabled || a.implicit() != c.implicit {
				t.Errorf("admin %+v: enabled %v implicit %v", a, a.Enabled(), a.implicit())
			}
		})
	}
}

// TestAdminDefaultFollowsFlags: a --listen applied after the file was read moves the
// implicit admin default with it; an explicit --admin is not implicit.
func TestAdminDefaultFollowsFlags(t *testing.T) {
	cfg, err := ParseConfig(nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Listen = "127.0.0.1:0"
	cfg.Defaults()
	if cfg.Admin.Listen != "127.0.0.1:0" || !cfg.Admin.implicit() {
		t.Errorf("after --listen :0: %+v", cfg.Admin)
	}
	cfg.Admin.Listen = "127.0.0.1:9999"
	cfg.Defaults()
	if cfg.Admin.Listen != "127.0.0.1:9999" || cfg.Admin.implicit() {
		t.Errorf("after --admin: %+v", cfg.Admin)
	}
}
