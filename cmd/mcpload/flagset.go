package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
)

// newFlagSet is the flag set of one mcpload command: errors go to stderr, and the usage
// (the command's synopsis, then the defaults of its flags) too, so that each command
// states only what it is.
func newFlagSet(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags reads a command's arguments into fs. When ok is false the command ends at
// once with code: exitOK after -h or --help (the usage is printed), exitError after a
// bad flag (the flag package has said what was wrong, and printed the usage).
func parseFlags(fs *flag.FlagSet, args []string) (code int, ok bool) {
	err := fs.Parse(args)
	switch {
	case err == nil:
		return exitOK, true
	case errors.Is(err, flag.ErrHelp):
		return exitOK, false
	}
	return exitError, false
}
