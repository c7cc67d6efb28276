package app_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/cmd/mcpbackend/mcpbackendtest"
	backendsrv "github.com/mcprouter/mcprouter/cmd/mcpbackend/server"
	"github.com/mcprouter/mcprouter/cmd/mcprouter/app"
	"github.com/mcprouter/mcprouter/cmd/mcprouter/app/apptest"
	"github.com/mcprouter/mcprouter/internal/mcpraw"
	"github.com/mcprouter/mcprouter/transport/auth"
)

// TestVirtualServerMetrics: the per-endpoint counters move for the endpoint that
// served the requests and no other: its calls by outcome, its denials (a tool outside
// its selection), its sessions.
func TestVirtualServerMetrics(t *testing.T) {
	a := mcpbackendtest.Start(t, backendsrv.Config{Name: "a", Tick: -1})
	b := mcpbackendtest.Start(t, backendsrv.Config{Name: "b", Tick: -1})
	var cfg app.Config
	cfg.Listen = "127.0.0.1:0"
	cfg.Backends = []app.BackendConfig{{Name: "a", URL: a.URL()}, {Name: "b", URL: b.URL()}}
	cfg.VirtualServers = []app.VirtualServer{
		{Name: "x", Backends: []string{"a"}, Exclude: []string{"a__fail"}, Auth: auth.Config{Mode: auth.ModeOff}},
		{Name: "y", Backends: []string{"b"}, Auth: auth.Config{Mode: auth.ModeOff}},
	}
	r := apptest.Start(t, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), 20*time.Second)
	if r.Prometheus == nil {
		t.Fatal("no metrics registry")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, name := range []string{"x", "y"} {
		c := &mcpraw.Client{URL: r.VServerURL(name), Version: "2025-03-26", HTTP: &http.Client{}}
		if rep, err := c.Initialize(ctx, "{}"); err != nil || rep.Status != 200 {
			t.Fatalf("%s: initialize: %v %v", name, err, rep)
		}
		if name != "x" {
			continue
		}
		if rep, err := c.Post(ctx, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"a__echo","arguments":{"text":"hi"}}}`); err != nil || rep.Status != 200 || !strings.Contains(string(rep.Body), `"result"`) {
			t.Fatalf("x calling a__echo: %v %v", err, rep)
		}
		if rep, err := c.Post(ctx, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"a__fail","arguments":{}}}`); err != nil || !strings.Contains(string(rep.Body), "not exposed") {
			t.Fatalf("x calling a__fail: %v %v, want refused", err, rep)
		}
	}
	mfs, err := r.Prometheus.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), "mcprouter_endpoint_") {
			continue
		}
		for _, m := range mf.GetMetric() {
			key := mf.GetName()
			for _, l := range m.GetLabel() {
				key += "," + l.GetValue()
			}
			got[key] = m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	for k, want := range map[string]float64{
		"mcprouter_endpoint_requests_total,x,ok":        2, // initialize, a__echo
		"mcprouter_endpoint_requests_total,x,error":     1, // a__fail, refused
		"mcprouter_endpoint_requests_total,y,ok":        1, // initialize
		"mcprouter_endpoint_requests_total,y,error":     0,
		"mcprouter_endpoint_requests_total,(main),ok":   0,
		"mcprouter_endpoint_policy_denied_total,x":      1,
		"mcprouter_endpoint_policy_denied_total,y":      0,
		"mcprouter_endpoint_policy_denied_total,(main)": 0,
		"mcprouter_endpoint_policy_limited_total,x":     0,
		"mcprouter_endpoint_sessions,x":                 1,
		"mcprouter_endpoint_sessions,y":                 1,
		"mcprouter_endpoint_sessions,(main)":            0,
	} {
		if g, ok := got[k]; !ok || g != want {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, want)
		}
	}
}
