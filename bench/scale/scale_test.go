package scale

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/internal/testbin"
)

// TestRunSmall runs the whole benchmark at a tiny size, on both generations of
// streams: the binaries are built, the processes started and stopped, every held
// session receives the update, and the calls are answered throughout. Figures of speed
// are the benchmark's, not this test's.
func TestRunSmall(t *testing.T) {
	testbin.Long(t, "builds three binaries and starts five processes")
	bins := map[string]string{}
	dir := t.TempDir() // the binaries, built by the first run, and each run's logs
	for _, protocol := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(protocol, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			rep, err := Run(ctx, Config{Sessions: 200, Routers: 2, Loaders: 1, Protocol: protocol, Persist: true, Updates: 2,
				Dir: dir, Bins: bins, Wait: 30 * time.Second, Settle: 100 * time.Millisecond, Logf: t.Logf})
			if err != nil {
				t.Fatal(err)
			}
			for _, b := range []string{"mcprouter", "mcpbackend", "mcpload"} {
				bins[b] = dir + "/" + b // built once, by the first run
			}
			var out bytes.Buffer
			if err := rep.WriteTable(&out); err != nil {
				t.Fatal(err)
			}
			t.Logf("\n%s", out.String())
			if rep.Held != 200 || rep.Failed != 0 {
				t.Errorf("held %d, failed %d (%s)", rep.Held, rep.Failed, rep.FirstOpenError)
			}
			if rep.Received != 400 || rep.Missing != 0 || len(rep.Updates) != 2 || rep.Updates[1].Received != 200 {
				t.Errorf("the two updates reached %d of 2x200 (%d missing): %+v", rep.Received, rep.Missing, rep.Updates)
			}
			if rep.CallsSetup.Calls == 0 || rep.CallsSetup.Errors != 0 || rep.CallsUpdate.Errors != 0 {
				t.Errorf("calls: %+v %+v (%s)", rep.CallsSetup, rep.CallsUpdate, rep.FirstCallError)
			}
			if len(rep.Routers) != 2 || rep.Routers[0].RSSBefore == 0 || rep.Routers[0].Sessions+rep.Routers[1].Sessions < 200 {
				t.Errorf("routers: %+v", rep.Routers)
			}
			for _, want := range []string{"| router0", "| loaders", "sessions/s", "p99"} {
				if !strings.Contains(out.String(), want) {
					t.Errorf("the table has no %q", want)
				}
			}
		})
	}
}
