package cluster

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/mcprouter/mcprouter/bench/results"
)

// Report is what a long run ends with: a paragraph of figures, the checks, and the
// command line that reproduces the run (quoted in the results section).
type Report struct {
	Summary string
	Checks  Checks
	Command string
}

// Table is the summary and the checks as printed.
func (r Report) Table() string {
	var b strings.Builder
	b.WriteString("\n" + r.Summary + "\n\n")
	r.Checks.WriteTable(&b)
	return b.String()
}

// Section is the "## name" section of the results file: the command line, the day it
// ran, and the table.
func (r Report) Section(name string, day time.Time) string {
	return fmt.Sprintf("## %s\n\n`%s` (%s):\n%s", name, r.Command, day.UTC().Format("2006-01-02"), r.Table())
}

// Place is where a long run works and reports, the flags every long run takes: the
// working directory (empty: a temporary one), whether to keep it when every check held,
// and the results file whose section the run writes.
type Place struct {
	Dir, Out string
	Keep     bool
}

// Flags registers -dir, -keep and -out on the command line for the run name.
func (p *Place) Flags(name string) {
	flag.StringVar(&p.Dir, "dir", "", "working directory for binaries, configurations and logs (default: a temporary one, kept when a check fails)")
	flag.BoolVar(&p.Keep, "keep", false, "keep the working directory")
	flag.StringVar(&p.Out, "out", "", "results file whose \"## "+name+"\" section is written or replaced (e.g. bench/RESULTS.md)")
}

// Command is main for a long-run command (chaos, soak), called once its own flags are
// registered: it serves the NATS node when the command was started as one, registers
// p's flags, parses the command line and exits with Main's code. The run is in two
// parts, as both commands are: run gathers the figures into a verdict (in the working
// directory), and report judges them; a run that fails has its error and no report.
func Command[V any](name string, p *Place, run func(ctx context.Context, dir string) (V, error), report func(V) Report) {
	ServeNATSNode()
	p.Flags(name)
	flag.Parse()
	os.Exit(Main(name, *p, Logf, func(ctx context.Context, dir string) (Report, error) {
		v, err := run(ctx, dir)
		if err != nil {
			return Report{}, err
		}
		return report(v), nil
	}))
}

// Logf logs a line on stderr with the time of day, the long runs' progress log.
func Logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, time.Now().Format("15:04:05 ")+format+"\n", args...)
}

// Main is the outline the long-run commands (chaos, soak) share: a working directory
// (a temporary one unless p.Dir names one), the run under a context that SIGINT and
// SIGTERM end, the table printed, the "## name" section written into p.Out when set.
// The directory is removed only when every check held and p.Keep is false, so a failure
// leaves its logs. It returns the exit code: 0 passed, 1 a check failed, 2 an error.
func Main(name string, p Place, logf func(string, ...any), run func(ctx context.Context, dir string) (Report, error)) int {
	dir, keep, out := p.Dir, p.Keep, p.Out
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
	r, err := run(ctx, dir)
	if err != nil {
		logf("%s: %v (logs in %s)", name, err, dir)
		return 2
	}
	fmt.Print(r.Table())
	if out != "" {
		if err := results.WriteSection(out, "## "+name, r.Section(name, time.Now())); err != nil {
			logf("%s: %v", name, err)
			return 2
		}
	}
	if !r.Checks.Passed() {
		logf("%s: FAILED; logs in %s", name, dir)
		return 1
	}
	if !keep {
		os.RemoveAll(dir)
	}
	return 0
}
