package conformance

import (
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/internal/testbin"
)

// reverseExpectedFailures names the scenarios of the 2025 suites allowed to fail through
// the router in front of the stateless conformance server, each with its reason; as
// for expectedFailures, a listed scenario that passes fails the test. The four listed
// fail against the stateless server alone too, and TestConformanceReverse checks that
// they do (its "alone" runs: both suites, a 2025 client straight to the server; 26 of
// 30 and 55 of 59 checks pass there): their tools make the server-to-client request
// themselves (ServerSession's CreateMessage, Elicit), which a server without sessions
// cannot send in either generation; the tools that answer input_required instead
// (test_input_required_result_*) are translated (router/fleet/reverse_test.go).
var reverseExpectedFailures = map[string]string{
	"tools-call-sampling":          statelessCannotAsk,
	"tools-call-elicitation":       statelessCannotAsk,
	"elicitation-sep1034-defaults": statelessCannotAsk,
	"elicitation-sep1330-enums":    statelessCannotAsk,
}

// statelessCannotAsk is why a scenario whose tool sends a server-to-client request fails
// behind a stateless backend.
const statelessCannotAsk = "the stateless conformance server fails it alone: its tool sends a server-to-client request, which it cannot without a session"

// TestConformanceReverse runs the 2025 suites (suites: the ones TestConformance runs
// over HTTP and stdio backends) through the router in front of the Go SDK's conformance
// server in stateless mode, pinned to 2026-07-28 (issue 12, translation the other way):
// the suite's client holds a 2025 session with the router, which uses the backend
// without one (server/discover, per-request _meta, subscriptions/listen) and turns the
// backend's input_required results into sampling, elicitation and roots requests on the
// client's session (router/fleet/reverse.go). The same suites run straight against
// the server first ("alone"), with the same expected failures: a scenario listed there
// that the server passes alone fails the test, and so does one it fails that is not.
func TestConformanceReverse(t *testing.T) {
	testbin.Long(t, "starts processes and Node")
	testbin.Node(t) // without Node the test skips (fails in CI) here, before anything is built
	p, backend := routerBeforeEverything(t, true, "")
	if v := p.Log.Value("backend instance connected", "protocol"); v != "2026-07-28" {
		t.Fatalf("the router speaks %q to the backend, want 2026-07-28:\n%s", v, p.Log)
	}
	for _, run := range []struct{ name, url string }{{"alone", backend}, {"router", "http://" + p.Addr() + "/mcp"}} {
		for i := range suites {
			t.Run(run.name+"/"+suites[i].name, func(t *testing.T) {
				runSuite(t, run.url, suites[i], reverseExpectedFailures, 5*time.Minute)
			})
		}
	}
}
