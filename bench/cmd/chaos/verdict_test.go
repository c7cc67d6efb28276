package main

import (
	"strings"
	"testing"

	"github.com/mcprouter/mcprouter/bench/internal/cluster"
	"github.com/mcprouter/mcprouter/loadgen/report"
)

// TestFailBudget: a backend's calls may fail at 0.1% plus one per load session for each
// fault on one of its replicas, whatever the rate; a fault elsewhere adds nothing.
func TestFailBudget(t *testing.T) {
	tools := cluster.Tools{Web: "web__echo", CLI: "cli__echo"}
	cases := []struct {
		name     string
		faults   []played
		requests int64
		errors   int64
		pass     bool
	}{
		{"no fault, under 0.1%", nil, 100000, 100, true},
		{"no fault, over 0.1%", nil, 100000, 101, false},
		{"a slow machine's four pauses", []played{{hits: "web"}, {hits: "web"}, {hits: "web"}, {hits: "web"}}, 60000, 60 + 4*48, true},
		{"faults on the other backend add nothing", []played{{hits: "cli"}, {hits: ""}}, 60000, 61, false},
		{"a router that kept sending to the paused replica", []played{{hits: "web"}}, 60000, 3000, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := &verdict{tools: tools, sessions: 48, faults: tc.faults, rep: &report.Report{ByTool: map[string]*report.Stats{
				tools.Web: {Requests: tc.requests, Errors: tc.errors},
				tools.CLI: {Requests: tc.requests},
			}}}
			for _, c := range v.checks() {
				if strings.HasPrefix(c.What, tools.Web+" calls succeed") {
					if c.Pass != tc.pass {
						t.Fatalf("%s: %s: pass %v, want %v", c.What, c.Figure, c.Pass, tc.pass)
					}
					return
				}
			}
			t.Fatal("no check for the web backend's calls")
		})
	}
}
