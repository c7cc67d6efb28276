// Package conformance runs the official MCP conformance suite against mcprouter fronting
// the Go SDK's conformance server, over Streamable HTTP and over stdio. It holds only
// tests; see conformance_test.go.
package conformance
