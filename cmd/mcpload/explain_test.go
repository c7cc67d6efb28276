package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/mcprouter/mcprouter/cmd/mcpbackend/mcpbackendtest"
	"github.com/mcprouter/mcprouter/cmd/mcpbackend/server"
)

// backendURL starts the reference backend on loopback for one test.
func backendURL(t *testing.T) string {
	t.Helper()
	return mcpbackendtest.Start(t, server.Config{Tick: -1}).URL()
}

// Without --args, the arguments come from the tool's inputSchema, mcpload says what it
// sends, and the backend accepts them (sleep requires ms, an integer of at least 0).
func TestArgsFromSchema(t *testing.T) {
	url := backendURL(t)
	code, out, errOut := mcpload(t, "--url", url, "--sessions", "2", "--warmup", "0s", "--duration", "300ms",
		"--tool", "sleep", "--quiet", "--assert", "errors==0")
	if code != exitOK {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	if !strings.Contains(errOut, `calling sleep with {"ms":0}`) {
		t.Errorf("mcpload did not say what it sent:\n%s", errOut)
	}
	// An unknown tool: {} is sent, and mcpload says why.
	code, out, errOut = mcpload(t, "--url", url, "--sessions", "1", "--warmup", "0s", "--duration", "200ms",
		"--tool", "no_such_tool", "--quiet")
	if code != exitOK || !strings.Contains(errOut, `lists no tool "no_such_tool": sending {}`) {
		t.Errorf("exit %d\n%s\n%s", code, out, errOut)
	}
}

// When calls fail the report gives the first message of each class, the failed calls
// keep their latency in the per-method table and in the JSON, and the progress line
// warns as soon as most calls fail.
func TestFailuresExplained(t *testing.T) {
	url := backendURL(t)
	jsonPath := filepath.Join(t.TempDir(), "run.json")
	code, out, errOut := mcpload(t, "--url", url, "--sessions", "2", "--warmup", "0s", "--duration", "1500ms",
		"--tool", "fail_rpc", "--args", `{"message":"the disk is on fire","code":-32042}`, "--json", jsonPath)
	if code != exitOK {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	if !strings.Contains(out, "jsonrpc_-32042=") || !strings.Contains(out, "first: the disk is on fire") {
		t.Errorf("report lacks the first message of the class:\n%s", out)
	}
	if !regexp.MustCompile(`(?m)^\s+failed\s+\d+\s+\d+\s+-\s+\d`).MatchString(out) {
		t.Errorf("per-method table lacks the failed calls' latency:\n%s", out)
	}
	if !strings.Contains(errOut, "WARNING: 100% of calls failed (jsonrpc_-32042: the disk is on fire)") {
		t.Errorf("progress did not warn:\n%s", errOut)
	}
	var rep struct {
		FirstErrors map[string]string `json:"first_errors"`
		ByMethod    map[string]struct {
			Errors       int64             `json:"errors"`
			FirstErrors  map[string]string `json:"first_errors"`
			ErrorLatency *struct {
				Count int64   `json:"count"`
				P50   float64 `json:"p50"`
			} `json:"error_latency_us"`
		} `json:"by_method"`
	}
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	m := rep.ByMethod["tools/call"]
	if rep.FirstErrors["jsonrpc_-32042"] != "the disk is on fire" || m.FirstErrors["jsonrpc_-32042"] != "the disk is on fire" || m.Errors == 0 || m.ErrorLatency == nil ||
		m.ErrorLatency.Count != m.Errors || m.ErrorLatency.P50 <= 0 {
		t.Errorf("JSON: first errors %v, tools/call %+v", rep.FirstErrors, m)
	}

	// A tool error (isError) gives its text.
	code, out, errOut = mcpload(t, "--url", url, "--sessions", "1", "--warmup", "0s", "--duration", "200ms",
		"--tool", "fail", "--args", `{"message":"quota exceeded"}`, "--quiet")
	if code != exitOK || !strings.Contains(out, "tool_error=") || !strings.Contains(out, "first: quota exceeded") {
		t.Errorf("exit %d\n%s\n%s", code, out, errOut)
	}
}

// With no call given, mcpload lists the server's tools; without a terminal it says
// which flag to add, on a terminal it asks and calls the tool chosen.
func TestNoToolListsTools(t *testing.T) {
	url := backendURL(t)
	code, out, errOut := mcpload(t, "--url", url, "--quiet")
	if code != exitError {
		t.Fatalf("exit %d, want %d\n%s\n%s", code, exitError, out, errOut)
	}
	for _, want := range []string{"echo", "sleep", "Returns its text argument.", "add --tool NAME"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
	if strings.Contains(errOut, "call which tool?") {
		t.Errorf("asked without a terminal:\n%s", errOut)
	}

	for _, answer := range []string{"payload\n", "nope\n1\n"} {
		var stdout, stderr bytes.Buffer
		code = runWith(context.Background(), []string{"--url", url, "--sessions", "1", "--warmup", "0s", "--duration", "200ms",
			"--quiet", "--assert", "errors==0"}, strings.NewReader(answer), &stdout, &stderr)
		if code != exitOK || !strings.Contains(stderr.String(), "call which tool?") {
			t.Fatalf("answer %q: exit %d\n%s\n%s", answer, code, stdout.String(), stderr.String())
		}
		want := `calling payload with {"bytes":0}`
		if answer != "payload\n" {
			want = "calling echo with" // the first listed tool
			if !strings.Contains(stderr.String(), `"nope" is neither`) {
				t.Errorf("a wrong answer was not explained:\n%s", stderr.String())
			}
		}
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("answer %q: stderr lacks %q:\n%s", answer, want, stderr.String())
		}
	}
	// A terminal that closes without an answer is a usage error, not a hang.
	var stdout, stderr bytes.Buffer
	if code := runWith(context.Background(), []string{"--url", url}, strings.NewReader(""), &stdout, &stderr); code != exitError {
		t.Errorf("closed terminal: exit %d\n%s", code, stderr.String())
	}
}
