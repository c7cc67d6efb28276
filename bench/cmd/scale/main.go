// Command scale runs the 100,000-session benchmark of issue 15 on this machine and
// prints its table (bench/scale says what it starts and measures):
//
//	go run ./bench/cmd/scale                              # 10,000 sessions, 2 routers, 2 loaders
//	go run ./bench/cmd/scale -sessions 100000            # 8 routers, 8 loaders
//	go run ./bench/cmd/scale -sessions 20000 -protocol 2026-07-28   # subscriptions/listen streams
//
// Ctrl-C stops every process it started. Exit status: 0 done, 1 the run failed, 2 usage.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/mcprouter/mcprouter/bench/scale"
)

func main() {
	var c scale.Config
	flag.IntVar(&c.Sessions, "sessions", 10000, "sessions to hold, all processes together")
	flag.IntVar(&c.Routers, "routers", 0, fmt.Sprintf("router processes (default: one per %d sessions, at least 2)", scale.PerProcess))
	flag.IntVar(&c.Loaders, "loaders", 0, fmt.Sprintf("mcpload processes (default: one per %d sessions, at least 2)", scale.PerProcess))
	flag.StringVar(&c.Protocol, "protocol", "2025-11-25", "2025-11-25 (GET streams) or 2026-07-28 (subscriptions/listen streams)")
	flag.StringVar(&c.SourceAddrs, "source-addrs", "127.0.0.2-127.0.0.9", "loopback addresses the loaders connect from")
	flag.IntVar(&c.Concurrency, "concurrency", 128, "sessions each loader opens at once")
	flag.BoolVar(&c.Persist, "persist", true, "keep session records in JetStream, as a default router does (false: sessions.no_persist)")
	flag.StringVar(&c.SessionStorage, "session-storage", "", "where the NATS server keeps the records: file or memory (default: the router's default)")
	flag.IntVar(&c.Callers, "callers", 2, "sessions of the closed loop of tools/call kept running throughout")
	flag.DurationVar(&c.CallPause, "call-pause", 5*time.Millisecond, "pause between two calls of one caller")
	flag.IntVar(&c.Updates, "updates", 1, "updates of the resource, a second apart, each timed at every session")
	flag.DurationVar(&c.Wait, "wait", time.Minute, "bound on the update's arrival at every session")
	flag.DurationVar(&c.Settle, "settle", 3*time.Second, "pause between the last session held and the memory's reading")
	flag.StringVar(&c.Dir, "dir", "", "directory of binaries, configurations and logs (default: a temporary one)")
	flag.BoolVar(&c.Keep, "keep", false, "keep the temporary directory (logs)")
	flag.BoolVar(&c.Profiles, "profiles", false, "write loaderN.cpu.pprof, routerN.cpu.pprof (the opening), loaderN.heap.pprof and routerN.heap.pprof (sessions held) in the directory (with -keep or -dir)")
	jsonOut := flag.String("json", "", "also write the report as JSON to this file")
	bins := flag.String("bins", "", "directory of prebuilt mcprouter, mcpbackend and mcpload binaries (default: built with go build)")
	flag.Parse()
	if *bins != "" {
		c.Bins = map[string]string{}
		for _, b := range []string{"mcprouter", "mcpbackend", "mcpload"} {
			c.Bins[b] = filepath.Join(*bins, b)
		}
	}
	if flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "scale: unexpected argument", flag.Arg(0))
		os.Exit(2)
	}
	c.Logf = func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	rep, err := scale.Run(ctx, c)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "scale:", err)
		os.Exit(1)
	}
	rep.WriteTable(os.Stdout)
	if *jsonOut != "" {
		b, _ := json.MarshalIndent(rep, "", "  ")
		if err := os.WriteFile(*jsonOut, b, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "scale:", err)
			os.Exit(1)
		}
	}
}
