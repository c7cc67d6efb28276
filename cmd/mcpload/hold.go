package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/mcprouter/mcprouter/internal/ctxtime"
	"github.com/mcprouter/mcprouter/loadgen/client"
)

// holdCmd is `mcpload hold`: it opens --sessions sessions subscribed to --uri, each
// holding its stream open, and keeps them while a driver (a benchmark command, or a
// person) causes updates and asks when they arrived. The protocol is lines of text:
// while the sessions open it writes every two seconds
//
//	progress <held> <failed>
//
// and once they are open
//
//	ready <client.HoldOpened JSON>
//
// then answers each command read from its input with "ok [<JSON>]" or "error <reason>":
//
//	arm                      the next update each session receives is timed
//	collect <unix-ns> <wait> wait (a Go duration) until every session has it; the
//	                         receipt latencies from the trigger time <unix-ns>
//	                         (client.HoldRound JSON)
//	quit                     (or end of input, or a signal) ends the sessions and exits
//
// Several hold processes share one update: receipt times are wall-clock times of one
// machine.
func holdCmd(ctx context.Context, args []string, in io.Reader, stdout, stderr io.Writer) int {
	fs := newFlagSet("mcpload hold", "usage: mcpload hold --url URL [flags]\n\nHolds idle subscribed sessions and times the arrival of updates (commands on stdin: arm, collect UNIX_NS WAIT, quit).", stderr)
	var o client.Options
	fs.Var(&urlsFlag{t: &o}, "url", "MCP endpoint; repeat it (or separate by commas) for instances of one service: session i opens on instance i mod n")
	fs.Var(sourceAddrsFlag{&o}, "source-addrs", "local addresses to connect from, in turn, e.g. 127.0.0.2-127.0.0.9")
	fs.StringVar(&o.Protocol, "protocol", "", "protocol revision (default 2025-11-25: GET streams; 2026-07-28: subscriptions/listen streams)")
	var headers listFlag
	fs.Var(&headers, "header", "extra HTTP header 'Name: value' (repeatable)")
	sessions := fs.Int("sessions", 1000, "sessions to hold")
	uri := fs.String("uri", "memo://board", "resource every session subscribes to")
	concurrency := fs.Int("concurrency", 256, "sessions being opened at once")
	timeout := fs.Duration("timeout", 30*time.Second, "bound on each step of opening a session")
	cpuProfile := fs.String("cpuprofile", "", "write the loader's CPU profile (opening and rounds) to this file")
	memProfile := fs.String("memprofile", "", "write the loader's heap profile, once the sessions are open, to this file")
	fs.BoolVar(&o.Pipeline, "pipeline", true, "send notifications/initialized and the subscription before the GET on the stream's connection, in one write (HTTP/1.1 pipelining), instead of each on its own")
	closeEnd := fs.Bool("close", false, "end the sessions one by one (DELETE) on quit, instead of letting the exit close their connections")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if o.URL == "" || *sessions < 1 {
		fmt.Fprintln(stderr, "mcpload hold: --url and --sessions >= 1 are required")
		return exitError
	}
	if err := headers.addHeaders(&o.Headers); err != nil {
		fmt.Fprintln(stderr, "mcpload hold:", err)
		return exitError
	}
	if *cpuProfile != "" {
		stop, err := startProfile(*cpuProfile)
		if err != nil {
			fmt.Fprintln(stderr, "mcpload hold:", err)
			return exitError
		}
		defer stop()
	}
	// One connection for every few sessions' POSTs: they are idle once open.
	o.MaxConns = max(*concurrency, 16)
	holdGC()
	h, err := client.NewHolder(o, *uri)
	if err != nil {
		fmt.Fprintln(stderr, "mcpload hold:", err)
		return exitError
	}
	openDone, progressDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(progressDone)
		ctxtime.Every(openDone, 2*time.Second, func() {
			held, failed := h.Progress()
			fmt.Fprintf(stdout, "progress %d %d\n", held, failed)
		})
	}()
	opened := h.Open(*sessions, *concurrency, *timeout)
	close(openDone)
	<-progressDone // no progress line after ready
	// The opening's garbage goes back to the system: a holder is idle from now on, and
	// what it keeps resident is what the sessions hold.
	debug.FreeOSMemory()
	if *memProfile != "" {
		if err := writeHeapProfile(*memProfile); err != nil {
			fmt.Fprintln(stderr, "mcpload hold:", err)
		}
	}
	defer func() {
		if *closeEnd {
			h.Close(*concurrency, 5*time.Second)
		}
	}()
	if err := writeLine(stdout, "ready", opened); err != nil {
		return exitError
	}
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(in)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	for {
		var line string
		select {
		case <-ctx.Done():
			return exitOK
		case l, ok := <-lines:
			if !ok {
				return exitOK
			}
			line = l
		}
		cmd, arg, _ := strings.Cut(strings.TrimSpace(line), " ")
		var err error
		switch cmd {
		case "arm":
			h.Arm()
			_, err = fmt.Fprintln(stdout, "ok")
		case "collect":
			var trigger time.Time
			var wait time.Duration
			if trigger, wait, err = parseCollect(arg); err != nil {
				_, err = fmt.Fprintln(stdout, "error", err)
				break
			}
			err = writeLine(stdout, "ok", h.Collect(trigger, wait))
		case "quit":
			return exitOK
		case "":
		default:
			_, err = fmt.Fprintf(stdout, "error unknown command %q\n", cmd)
		}
		if err != nil {
			return exitError
		}
	}
}

// holdGCPercent is a holder's GOGC unless the environment sets one. Opening sessions
// makes short-lived garbage over a live heap and goroutine stacks that grow with
// every session held, and each collection scans all of them: collecting at 4x the live
// heap instead of 2x makes a quarter of the collections. What stays resident once the
// sessions are open is unchanged, as the holder collects and returns its garbage then
// (debug.FreeOSMemory).
const holdGCPercent = 400

// holdGC sets the holder's GOGC (holdGCPercent) when the environment names none.
func holdGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(holdGCPercent)
	}
}

// writeHeapProfile writes the heap profile (after a collection: what is held) to path.
func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	runtime.GC()
	if err := pprof.WriteHeapProfile(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// parseCollect reads the arguments of collect: a Unix time in nanoseconds and a wait.
func parseCollect(arg string) (time.Time, time.Duration, error) {
	f := strings.Fields(arg)
	if len(f) != 2 {
		return time.Time{}, 0, errors.New("collect: want <unix-ns> <wait>")
	}
	ns, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil {
		return time.Time{}, 0, fmt.Errorf("collect: trigger time: %v", err)
	}
	wait, err := time.ParseDuration(f[1])
	if err != nil || wait < 0 {
		return time.Time{}, 0, fmt.Errorf("collect: wait %q is not a duration", f[1])
	}
	return time.Unix(0, ns), wait, nil
}

// writeLine writes "<word> <v as JSON>" on one line.
func writeLine(w io.Writer, word string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s %s\n", word, b)
	return err
}
