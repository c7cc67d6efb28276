package app

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/transport/natsbus"
)

func TestEdgeConfig(t *testing.T) {
	for _, c := range []struct {
		name, yaml string
		err        string // "" when valid
	}{
		{"loopback", "listen: 127.0.0.1:0\n", ""},
		{"localhost", "listen: localhost:0\n", ""},
		{"ipv6 loopback", "listen: '[::1]:0'\n", ""},
		{"all interfaces", "listen: 0.0.0.0:8080\n", "set auth.mode"},
		{"empty host", "listen: ':8080'\n", "set auth.mode"},
		{"lists without a mode", "listen: 0.0.0.0:8080\nsecurity: {allowed_hosts: [mcp.example], allowed_origins: ['https://app.example']}\n", "set auth.mode"},
		{"explicit off", "listen: 0.0.0.0:8080\nauth: {mode: \"off\"}\n", ""},
		{"deprecated consent without lists", "listen: 0.0.0.0:8080\nsecurity: {allow_unauthenticated: true}\n", "security.allowed_hosts"},
		{"deprecated consent", "listen: 0.0.0.0:8080\nsecurity: {allow_unauthenticated: true, allowed_hosts: [mcp.example], allowed_origins: ['https://app.example']}\n", ""},
		{"nats listen without credentials", "nats: {listen: 127.0.0.1:4222}\n", "set nats.user and nats.password"},
		{"nats listen with a token", "nats: {listen: 127.0.0.1:4222, token: t0k}\n", ""},
		{"memory limit", "memory_limit: 2GiB\n", ""},
		{"bad memory limit", "memory_limit: lots\n", "memory_limit"},
		{"child env", "backends:\n  - {name: a, command: [x], env: [A=1], env_allow: [PATH, 'LC_*']}\n", ""},
		{"bad child env", "backends:\n  - {name: a, command: [x], env: [A]}\n", "backends[0].env"},
		{"connections off", "connections: {write_timeout: -1s, max_per_address: -1}\n", ""},
		{"negative concurrency", "connections: {concurrency: -5}\n", "connections.concurrency"},
	} {
		_, err := ParseConfig([]byte(c.yaml))
		wantErr(t, c.name, err, c.err)
	}
}

func TestConnectionDefaults(t *testing.T) {
	cfg, err := ParseConfig(nil)
	if err != nil {
		t.Fatal(err)
	}
	want := ConnectionsConfig{HeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute, WriteTimeout: 30 * time.Second,
		IdleTimeout: 2 * time.Minute, MaxPerAddress: 512, Concurrency: 32768, PipelinedReplyWait: time.Millisecond}
	if cfg.Connections != want {
		t.Errorf("defaults %+v, want %+v", cfg.Connections, want)
	}
	a := &App{cfg: cfg, log: slog.Default()}
	s := a.newServer()
	if s.ReadTimeout != 10*time.Second || s.WriteTimeout != 30*time.Second || s.MaxConnsPerIP != 512 ||
		!s.SecureErrorLogMessage || !s.ReduceMemoryUsage || s.HeaderReceived == nil || s.HeaderReceived(nil).ReadTimeout != time.Minute {
		t.Errorf("server limits not applied: read %s write %s per-IP %d secure logs %v",
			s.ReadTimeout, s.WriteTimeout, s.MaxConnsPerIP, s.SecureErrorLogMessage)
	}
	a.cfg.Connections = ConnectionsConfig{HeaderTimeout: -1, ReadTimeout: -1, WriteTimeout: -1, MaxPerAddress: -1}
	if s := a.newServer(); s.ReadTimeout != 0 || s.WriteTimeout != 0 || s.MaxConnsPerIP != 0 || s.HeaderReceived != nil {
		t.Errorf("-1 should turn limits off: %+v", s)
	}
}

func TestWarnClearNATS(t *testing.T) {
	for _, tc := range []struct {
		cfg  natsbus.Config
		warn bool
	}{
		{natsbus.Config{}, false},
		{natsbus.Config{Listen: "127.0.0.1:4222"}, false},
		{natsbus.Config{Listen: "0.0.0.0:4222"}, true},
		{natsbus.Config{Listen: "0.0.0.0:4222", TLS: natsbus.TLSConfig{Cert: "c", Key: "k"}}, false},
		{natsbus.Config{Listen: "127.0.0.1:4222", Cluster: natsbus.ClusterConfig{Listen: "10.0.0.1:6222"}}, true},
	} {
		var buf bytes.Buffer
		warnClearNATS(tc.cfg, slog.New(slog.NewTextHandler(&buf, nil)))
		if got := strings.Contains(buf.String(), "without TLS"); got != tc.warn {
			t.Errorf("%+v: warned %v, want %v", tc.cfg, got, tc.warn)
		}
	}
}
