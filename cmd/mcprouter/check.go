package main

import (
	"flag"
	"fmt"
	"io"

	"go.yaml.in/yaml/v3"

	"github.com/mcprouter/mcprouter/cmd/mcprouter/app"
)

// check validates a configuration file the way the router would at start, and prints
// the configuration it resolves to (every default applied), without starting anything:
// an operator's dry run before a deploy or a reload.
//
//	mcprouter check --config FILE
func check(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("mcprouter check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", "", "YAML configuration file to check (required)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *configPath == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "usage: mcprouter check --config FILE")
		return 2
	}
	cfg, err := app.LoadConfig(*configPath)
	if err != nil {
		fmt.Fprintf(stderr, "mcprouter check: %s: %v\n", *configPath, err)
		return 1
	}
	cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		fmt.Fprintf(stderr, "mcprouter check: %s: %v\n", *configPath, err)
		return 1
	}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "mcprouter check: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "# %s: valid; the configuration as resolved (defaults applied)\n", *configPath)
	_, err = stdout.Write(out)
	if err != nil {
		return 1
	}
	return 0
}
