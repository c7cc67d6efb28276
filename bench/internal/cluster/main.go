package cluster

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/mcprouter/mcprouter/bench/results"
)

// Outcome is what a long run ends with: its table, the results section around it, and
// whether every check held.
type Outcome struct {
	Table, Section string
	Passed         bool
}

// Main is the outline the long-run commands (chaos, soak) share: a working directory
// (a temporary one unless dir names one), the run under a context that SIGINT and
// SIGTERM end, the table printed, the "## name" section written into out when set.
// The directory is removed only when every check held and keep is false, so a failure
// leaves its logs. It returns the exit code: 0 passed, 1 a check failed, 2 an error.
func Main(name, dir string, keep bool, out string, logf func(string, ...any), run func(ctx context.Context, dir string) (Outcome, error)) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if dir == "" {
		d, err := os.MkdirTemp("", name+"-")
		if err != nil {
			logf("%s: %v", name, err)
			return 2
		}
		dir = d
	}
	o, err := run(ctx, dir)
	if err != nil {
		logf("%s: %v (logs in %s)", name, err, dir)
		return 2
	}
	fmt.Print(o.Table)
	if out != "" {
		if err := results.WriteSection(out, "## "+name, o.Section); err != nil {
			logf("%s: %v", name, err)
			return 2
		}
	}
	if !o.Passed {
		logf("%s: FAILED; logs in %s", name, dir)
		return 1
	}
	if !keep {
		os.RemoveAll(dir)
	}
	return 0
}
