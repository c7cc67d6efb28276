package cluster

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// Check is one line of a long run's verdict: what is checked, the figures behind it and
// whether it held.
type Check struct {
	What, Figure string
	Pass         bool
}

// Checks is a run's verdict, in the order it is printed.
type Checks []Check

// Passed reports whether every check held.
func (cs Checks) Passed() bool {
	for _, c := range cs {
		if !c.Pass {
			return false
		}
	}
	return true
}

// WriteTable writes the checks as an aligned Markdown table, one PASS or FAIL each.
func (cs Checks) WriteTable(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "| check\t| figures\t| verdict\t|")
	fmt.Fprintln(tw, "|---\t|---\t|---\t|")
	for _, c := range cs {
		verdict := "PASS"
		if !c.Pass {
			verdict = "FAIL"
		}
		fmt.Fprintf(tw, "| %s\t| %s\t| %s\t|\n", c.What, c.Figure, verdict)
	}
	tw.Flush()
}
