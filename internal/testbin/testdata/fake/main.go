// Command fake stands in for a server in testbin's own tests: it logs like one, then
// waits for a signal (or, with -exit, exits at once with that status).
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	exit := flag.Int("exit", -1, "exit at once with this status")
	flag.Parse()
	fmt.Fprintln(os.Stderr, "level=INFO msg=starting")
	if *exit >= 0 {
		os.Exit(*exit)
	}
	// Like a real server, it handles SIGTERM before it says it is ready.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM)
	fmt.Fprintln(os.Stderr, `level=INFO msg="admin listening" addr=127.0.0.1:2`)
	fmt.Fprintln(os.Stderr, `level=INFO msg="fake listening" addr=127.0.0.1:1 other=x`)
	fmt.Println("to stdout")
	<-sig
	fmt.Fprintln(os.Stderr, "level=INFO msg=stopped")
}
