// Package conformance runs the official MCP conformance suite against mcprouter fronting
// the Go SDK's conformance server, over Streamable HTTP and over stdio (conformance_test.go),
// and judges each run from the suite's summary and exit status (summary.go), a parser
// tested on recorded suite output under testdata/.
package conformance
