package app_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/cmd/mcpbackend/mcpbackendtest"
	backendsrv "github.com/mcprouter/mcprouter/cmd/mcpbackend/server"
	"github.com/mcprouter/mcprouter/cmd/mcprouter/app"
	"github.com/mcprouter/mcprouter/cmd/mcprouter/app/apptest"
	"github.com/mcprouter/mcprouter/internal/mcpraw"
	"github.com/mcprouter/mcprouter/internal/testmetrics"
)

// startRouter starts cfg's router in the test process with its log discarded; it is
// shut down when the test ends.
func startRouter(t *testing.T, cfg app.Config) *app.App {
	t.Helper()
	return apptest.Start(t, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), 20*time.Second)
}

// twoBackends starts the reference backends "a" and "b" (no ticker, so no notices of
// their own) and returns a router config that listens on loopback and routes to both:
// the setup of the virtual server tests, which select one or the other.
func twoBackends(t *testing.T) app.Config {
	t.Helper()
	a := mcpbackendtest.Start(t, backendsrv.Config{Name: "a", Tick: -1})
	b := mcpbackendtest.Start(t, backendsrv.Config{Name: "b", Tick: -1})
	return app.Config{
		Listen:   "127.0.0.1:0",
		Backends: []app.BackendConfig{{Name: "a", URL: a.URL()}, {Name: "b", URL: b.URL()}},
	}
}

// openSession opens a 2025-03-26 session on the MCP endpoint url, sending token when
// set, on an HTTP client of its own; the test fails unless initialize answers 200.
func openSession(t *testing.T, ctx context.Context, url, token string) *mcpraw.Client {
	t.Helper()
	c := &mcpraw.Client{URL: url, Token: token, Version: "2025-03-26", HTTP: &http.Client{}}
	if rep, err := c.Initialize(ctx, "{}"); err != nil || rep.Status != http.StatusOK {
		t.Fatalf("%s: initialize: %v %v", url, err, rep)
	}
	return c
}

// series gathers a's metrics: the value of every counter and gauge series of a metric
// whose name starts with prefix, keyed by the name and the labels
// ("mcprouter_endpoint_sessions,endpoint=x"; testmetrics.Series). A router without a
// registry fails the test.
func series(t *testing.T, a *app.App, prefix string) map[string]float64 {
	t.Helper()
	if a.Prometheus == nil {
		t.Fatal("no metrics registry")
	}
	return testmetrics.Series(t, a.Prometheus, prefix)
}
