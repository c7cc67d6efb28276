package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"golang.org/x/term"

	"github.com/mcprouter/mcprouter/loadgen"
)

// errNoCall is returned when no call was given and there is no terminal to ask on.
var errNoCall = errors.New("no call given: add --tool NAME (its --args are built from its inputSchema when omitted), " +
	"--method METHOD (--method ping for the bare round trip), --uri or --prompt")

// terminalInput returns stdin when mcpload can ask its user a question there: stdin
// and stderr (where the question goes) are both terminals. Otherwise nil.
func terminalInput() io.Reader {
	if term.IsTerminal(int(os.Stdin.Fd())) && term.IsTerminal(int(os.Stderr.Fd())) {
		return os.Stdin
	}
	return nil
}

// toolLister lists the target's tools once, on first need.
type toolLister struct {
	cfg   *loadgen.Config
	tools []loadgen.Tool
	err   error
	done  bool
}

func (l *toolLister) list() ([]loadgen.Tool, error) {
	if !l.done {
		l.done = true
		timeout := l.cfg.Timeout
		if timeout <= 0 {
			timeout = 10 * time.Second // Validate's default; it has not run yet
		}
		l.tools, l.err = loadgen.ListTools(l.cfg.Target, timeout)
	}
	return l.tools, l.err
}

// noCall reports whether the command line leaves mcpload without anything to call.
func noCall(f *loadFlags, cfg *loadgen.Config) bool {
	return f.scenario == "" && len(cfg.Mix) == 0 && cfg.Mode != loadgen.Fanout
}

// chooseTool lists the server's tools on stderr and, with a terminal (in not nil),
// asks which one to call; without one it says which flag to add (errNoCall).
func chooseTool(l *toolLister, in io.Reader, stderr io.Writer) (string, error) {
	tools, err := l.list()
	if err != nil {
		return "", fmt.Errorf("%w (listing the server's tools failed: %v)", errNoCall, err)
	}
	if len(tools) == 0 {
		return "", fmt.Errorf("%w (the server lists no tools)", errNoCall)
	}
	fmt.Fprintf(stderr, "the server lists %d tools:\n", len(tools))
	tw := tabwriter.NewWriter(stderr, 0, 0, 2, ' ', 0)
	for i, t := range tools {
		desc, _, _ := strings.Cut(t.Description, "\n")
		fmt.Fprintf(tw, "  %d\t%s\t%s\n", i+1, t.Name, desc)
	}
	tw.Flush()
	if in == nil {
		return "", errNoCall
	}
	rd := bufio.NewReader(in)
	for range 5 {
		fmt.Fprintf(stderr, "call which tool? (number or name): ")
		line, err := rd.ReadString('\n')
		answer := strings.TrimSpace(line)
		if n, e := strconv.Atoi(answer); e == nil && n >= 1 && n <= len(tools) {
			return tools[n-1].Name, nil
		}
		if loadgen.FindTool(tools, answer) != nil {
			return answer, nil
		}
		if err != nil {
			break
		}
		fmt.Fprintf(stderr, "%q is neither a number from 1 to %d nor a listed tool\n", answer, len(tools))
	}
	return "", errNoCall
}

// schemaArgs returns the arguments to send to tool when none were given: the minimal
// valid arguments of its inputSchema, and says on stderr what it will send. When the
// tool is not listed or the list fails, it sends {} and says why.
func schemaArgs(l *toolLister, tool string, stderr io.Writer) string {
	tools, err := l.list()
	if err != nil {
		fmt.Fprintf(stderr, "mcpload: no --args for %s and listing the tools failed (%v): sending {}\n", tool, err)
		return "{}"
	}
	t := loadgen.FindTool(tools, tool)
	if t == nil {
		fmt.Fprintf(stderr, "mcpload: no --args, and the server lists no tool %q: sending {}\n", tool)
		return "{}"
	}
	args := loadgen.MinimalArgs(t.InputSchema)
	fmt.Fprintf(stderr, "mcpload: no --args: calling %s with %s (built from its inputSchema; give --args to choose)\n", tool, args)
	return args
}

// explainCall fills in what the command line left out: the tool to call (asked on the
// terminal in), and the arguments of a tool given without --args (or --fanout-args).
func explainCall(f *loadFlags, cfg *loadgen.Config, in io.Reader, stderr io.Writer) error {
	l := &toolLister{cfg: cfg}
	if noCall(f, cfg) {
		tool, err := chooseTool(l, in, stderr)
		if err != nil {
			return err
		}
		f.tool = tool
		cfg.Mix = []loadgen.OpSpec{{Tool: tool}}
	}
	if f.tool != "" && f.args == "" && len(cfg.Mix) == 1 && cfg.Mix[0].Tool == f.tool {
		cfg.Mix[0].Args = schemaArgs(l, f.tool, stderr)
	}
	if f.fanTool != "" && f.fanArgs == "" {
		cfg.Fanout.Trigger.Args = schemaArgs(l, f.fanTool, stderr)
	}
	return nil
}
