// Package apptest runs a router (app.App) inside a test process: the one copy of
// "build it, connect the backends, listen, shut it down at the end" that the
// end-to-end test packages (cluster, dashboards, bench) share. Only tests import it.
package apptest

import (
	"log/slog"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/cmd/mcprouter/app"
	"github.com/mcprouter/mcprouter/internal/testwait"
)

// Start builds a router from cfg, waits up to wait for its backends' catalogs, and
// listens; the router is shut down (within wait) when the test ends. A failure to
// build or listen fails the test.
func Start(tb testing.TB, cfg app.Config, log *slog.Logger, wait time.Duration) *app.App {
	tb.Helper()
	a, err := app.New(cfg, log)
	if err != nil {
		tb.Fatal(err)
	}
	// Registered before Listen: a router that fails to listen is shut down too (its
	// backends and NATS are running by then).
	testwait.Cleanup(tb, wait, a.Shutdown)
	a.Start(wait)
	if err := a.Listen(); err != nil {
		tb.Fatal(err)
	}
	return a
}
