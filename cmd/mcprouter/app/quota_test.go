package app

import (
	"context"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/transport"
)

// TestSessionsQuotaConfig: the fairness and budget keys have defaults that protect a
// default install, -1 turns each off, and bad values name their key.
func TestSessionsQuotaConfig(t *testing.T) {
	c, err := ParseConfig([]byte("listen: 127.0.0.1:0\n"))
	if err != nil {
		t.Fatal(err)
	}
	s := c.Sessions
	if s.MaxPerClient != 1000 || s.InitTimeout != 30*time.Second || s.InitRate != 100 || s.InitBurst != 200 ||
		s.BudgetBytes != 1<<30 || s.ShareBytes != 16<<20 || c.Streams.MaxReplyStreams != 0 {
		t.Errorf("defaults: %+v, max_reply_streams %d", s, c.Streams.MaxReplyStreams)
	}
	if rc := s.registryConfig(); rc.Budget == nil || rc.Budget.Share() != 16<<20 {
		t.Errorf("registry config without its budget: %+v", rc)
	}

	c, err = ParseConfig([]byte("listen: 127.0.0.1:0\nsessions: {max_per_client: -1, init_timeout: -1s, init_rate: -1, budget_bytes: -1}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if rc := c.Sessions.registryConfig(); rc.Budget != nil || rc.MaxPerClient != -1 || rc.InitTimeout >= 0 {
		t.Errorf("-1 should turn each off: %+v", rc)
	}

	for yaml, key := range map[string]string{
		"sessions: {budget_bytes: 1000, share_bytes: 2000}": "sessions.share_bytes",
		"sessions: {max_per_client: -5}":                    "sessions.max_per_client",
		"sessions: {init_rate: -3}":                         "sessions.init_rate",
		"streams: {max_reply_streams: -1}":                  "streams.max_reply_streams",
	} {
		if _, err := ParseConfig([]byte("listen: 127.0.0.1:0\n" + yaml + "\n")); err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("%s: %v, want an error naming %s", yaml, err, key)
		}
	}
}

// TestVirtualServersShareBudget: sessions.budget_bytes bounds everything kept for the
// clients of every endpoint together: a virtual server's registry draws on the main
// endpoint's budget, not on one of its own.
func TestVirtualServersShareBudget(t *testing.T) {
	cfg, err := ParseConfig([]byte("listen: 127.0.0.1:0\nadmin: {listen: \"off\"}\n" +
		"backends:\n  - {name: a, url: 'http://127.0.0.1:1/mcp'}\n" +
		"virtual_servers:\n  - {name: t, auth: {mode: \"off\"}}\n  - {name: u, auth: {mode: \"off\"}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Shutdown(context.Background())
	// The registry keeps its budget to itself (RegistryConfig.Budget); its address is
	// what tells whether two registries share one.
	budgetOf := func(r *transport.Registry) uintptr {
		return reflect.ValueOf(r).Elem().FieldByName("cfg").FieldByName("Budget").Pointer()
	}
	main := budgetOf(a.Reg)
	if main == 0 {
		t.Fatal("the main endpoint has no budget")
	}
	for _, v := range a.vservers.list() {
		if budgetOf(v.reg) != main {
			t.Errorf("virtual server %s: a budget of its own, not the main endpoint's", v.cfg.Name)
		}
	}
}
