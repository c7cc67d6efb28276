// Package fanout measures how fast one resource update reaches many subscribed MCP
// sessions through mcprouter, side by side with raw NATS fan-out of the same bytes.
//
// The system under test is a reference backend and two router instances sharing one
// NATS server (the first instance's embedded one), started by StartServers in this
// process or, when one process cannot hold the sockets of both ends, in a child process
// (Spawn and ServeChild). The client side (Run) opens N sessions spread evenly over the
// two instances, each initialized, subscribed to one resource and reading its GET stream
// on a TCP connection of its own, and N nats.go subscriptions on one subject spread over
// two connections. Then, update by update, it calls the backend's touch tool through one
// session and waits for every session's receipt, and publishes the same payload on NATS
// and waits for every subscription's receipt. Report holds the latency percentiles and
// deliveries per second of both, and renders the "## fan-out" section of
// bench/RESULTS.md.
//
// bench/cmd/fanout is the command; this package is the library it and the smoke test
// share.
package fanout
