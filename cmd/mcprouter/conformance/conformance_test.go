package conformance

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/internal/testbin"
)

// suite is one conformance suite run: its name in test output, the npm package that
// ships it and the arguments that select its scenarios.
type suite struct {
	name string
	pkg  string
	args []string
}

// suites are the conformance suite versions the issue names: 0.1.16 with its default
// suite, and 0.2.0-alpha.12's active suite for revision 2025-11-25. .ci/deps.sh installs
// both (the alpha under the alias conformance-alpha).
var suites = []suite{
	{"0.1.16", "@modelcontextprotocol/conformance", nil},
	{"0.2.0-alpha.12", "conformance-alpha", []string{"--suite", "active", "--spec-version", "2025-11-25"}},
}

// expectedFailures names the scenarios allowed to fail through the router, each with the
// reason it is expected: only scenarios the backend itself fails when the suite runs
// against it directly belong here (none today; see README "Conformance"). Any other
// failed scenario fails the test, and so does a listed one that passes.
var expectedFailures = map[string]string{}

// runSuite runs suite s, as .ci/deps.sh installs it with Node (testbin.Node), against
// url, allowing it limit, and fails the test for every problem Verdict finds in its
// output and exit status given the expected failures.
func runSuite(t *testing.T, url string, s suite, expected map[string]string, limit time.Duration) {
	t.Helper()
	node, pkg := testbin.Node(t, s.pkg)
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	args := append([]string{filepath.Join(pkg[0], "dist", "index.js"), "server", "--url", url}, s.args...)
	cmd := exec.CommandContext(ctx, node, args...)
	cmd.Dir = t.TempDir()
	out, err := cmd.CombinedOutput()
	text := string(out)
	problems := Verdict(text, err, expected)
	for _, p := range problems {
		t.Errorf("suite %s: %s", s.name, p)
	}
	if len(problems) > 0 {
		t.Logf("output:\n%s", tail(text, 8000))
		return
	}
	sum, _ := ParseSummary(text)
	for _, sc := range sum.Scenarios {
		if why, ok := expected[sc.Name]; ok {
			t.Logf("suite %s: %s fails as expected: %s", s.name, sc.Name, why)
		}
	}
	t.Logf("suite %s: %d scenarios, %d checks passed, %d failed", s.name, len(sum.Scenarios), sum.Passed, sum.Failed)
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

func TestConformance(t *testing.T) {
	testbin.Long(t, "starts processes and Node")
	testbin.Node(t) // without Node the test skips (fails in CI) here, before anything is built
	router := testbin.Build(t, testbin.Router)
	everything := testbin.BuildFixture(t, "github.com/modelcontextprotocol/go-sdk/conformance/everything-server")

	for _, mode := range []string{"http", "stdio"} {
		t.Run(mode, func(t *testing.T) {
			var backend string
			if mode == "http" {
				addr := testbin.FreeAddr(t)
				testbin.Start(t, testbin.Spec{Bin: everything, Args: []string{"-http", addr, "-stateless=false"}})
				testbin.WaitListening(t, addr, 20*time.Second)
				backend = fmt.Sprintf("    url: http://%s/mcp\n", addr)
			} else {
				backend = fmt.Sprintf("    command: [%q]\n", everything)
			}
			cfg := filepath.Join(t.TempDir(), "mcprouter.yaml")
			yaml := "listen: 127.0.0.1:0\nbackends:\n  - name: everything\n    prefix: \"\"\n" + backend
			if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			listen := testbin.Start(t, testbin.Spec{Bin: router, Args: []string{"--config", cfg}, Ready: []string{"mcprouter listening"}}).Addr()
			for i := range suites {
				t.Run(suites[i].name, func(t *testing.T) {
					runSuite(t, "http://"+listen+"/mcp", suites[i], expectedFailures, 5*time.Minute)
				})
			}
		})
	}
}
