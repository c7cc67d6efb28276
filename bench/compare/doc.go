// Package compare is the side-by-side benchmark harness behind `go run ./bench/cmd/compare`.
//
// In one run on one machine it measures, with the same load generator (mcpload) and the
// same load, real server processes on loopback:
//
//   - mcpbackend alone ("direct") and mcprouter in front of that same mcpbackend
//     ("router"): the cost of the router hop;
//   - the official Go SDK (github.com/modelcontextprotocol/go-sdk) in stateless
//     JSON-response mode and in session mode, and mark3labs/mcp-go in session and
//     stateless mode, all serving the same `echo` tool (the peers module under bench/peers,
//     built on its own so that the router's module does not depend on them);
//   - haproxy and nginx (Debian packages, installed with apt-get when missing) as
//     keep-alive reverse proxies in front of that same mcpbackend: they know nothing of
//     MCP, so they are the floor of what an HTTP hop costs; and fastrelay
//     (bench/cmd/fastrelay, target "fasthttp-relay"), a fasthttp server handing each
//     request to a fasthttp.HostClient: the floor of a hop on the libraries the router
//     is built on, so that the router's own share of its hop can be read off;
//   - mcprouter in front of `mcpbackend stdio` against the stdio bridges supergateway
//     (--stateful) and mcp-proxy (npm packages at pinned versions, installed into the
//     user's cache directory) in front of the same stdio program, each charged with the
//     CPU of its child processes too;
//   - `mcpload stub`, a trivial endpoint, to show what mcpload itself can sustain;
//   - an open-loop run at half of the direct maximum rate, direct and through the router,
//     for the tail-latency cost of the hop;
//   - the codec's envelope micro-benchmarks against other JSON libraries.
//
// Every closed-loop target runs once per round; the order is reversed every other round so
// that a machine getting busier or quieter over the run does not favour one side. Ratios are
// computed within a round and the median over rounds is reported. When taskset is available
// the load generator is pinned to one half of the CPUs and every server to the other half,
// so that the generator and the servers do not steal each other's cycles; they still share
// the machine (memory bandwidth, caches, the kernel's loopback path) and the report says so.
//
// A program that cannot be found or installed is skipped with a warning, and so are the
// targets that need it.
//
// The server processes' own CPU time (with their children's) is read from /proc around each run, so each result
// also says how many microseconds of server CPU one operation cost: on a shared machine that
// figure moves much less than the throughput does.
//
// Run does the measuring and returns a Result; Result.Markdown renders the "## compare"
// section of bench/RESULTS.md and results.ReplaceSection swaps it into the file without touching the
// other sections.
package compare
