package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"golang.org/x/term"

	"github.com/mcprouter/mcprouter/loadgen"
	"github.com/mcprouter/mcprouter/loadgen/report"
)

// progressPrinter shows the live view: one line rewritten in place on a terminal,
// one plain line per update otherwise (logs, CI).
type progressPrinter struct {
	w   io.Writer
	tty bool
	n   int // updates printed
}

func newProgressPrinter(w io.Writer) *progressPrinter {
	p := &progressPrinter{w: w}
	if f, ok := w.(*os.File); ok {
		p.tty = term.IsTerminal(int(f.Fd()))
	}
	return p
}

func (p *progressPrinter) update(pr loadgen.Progress) {
	var b strings.Builder
	fmt.Fprintf(&b, "%5.1fs %-10s", pr.Elapsed.Seconds(), pr.Phase)
	if pr.Remaining > 0 {
		fmt.Fprintf(&b, " %4.0fs left", pr.Remaining.Round(time.Second).Seconds())
	}
	fmt.Fprintf(&b, "  rate %s  p50 %s  p99 %s  errors %d", report.FormatRate(pr.RPS),
		report.FormatUS(float64(pr.P50)/1e3), report.FormatUS(float64(pr.P99)/1e3), pr.Errors)
	fmt.Fprintf(&b, "  | measured %d (%d errors)  sessions %d  cpu %.0f%%", pr.Requests, pr.TotalErrors, pr.Sessions, pr.CPU)
	if failing(pr) {
		fmt.Fprintf(&b, "  WARNING: %.0f%% of calls failed (%s: %s)", 100*float64(pr.Errors)/float64(pr.Completed), pr.LastErrorClass, pr.LastError)
	}
	p.n++
	if p.tty {
		fmt.Fprintf(p.w, "\r\x1b[K%s", b.String())
		return
	}
	fmt.Fprintln(p.w, b.String())
}

// failing reports whether more than half of the calls of the interval failed: then the
// figures measure the failure, and the line says so at once, with what went wrong.
func failing(pr loadgen.Progress) bool { return pr.Completed > 0 && 2*pr.Errors > pr.Completed }

// finish ends the in-place line so that what follows starts on its own line.
func (p *progressPrinter) finish() {
	if p.tty && p.n > 0 {
		fmt.Fprintln(p.w)
	}
}
