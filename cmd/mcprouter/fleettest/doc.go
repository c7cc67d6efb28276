// Package fleettest holds end-to-end tests of mcprouter in front of a fleet of real
// backends of every kind at once. It holds only tests.
//
// TestMain builds mcprouter and the reference backend (cmd/mcpbackend) once; when the
// tests run with -race, mcprouter is built with the race detector too, and a race it
// reports fails the test that started it. Each test then starts its own fleet on
// loopback with free ports:
//
//   - big: Streamable HTTP, 230 generated tools listed 50 per page, so that the router's
//     catalog fetch and its merged listing both need several pages;
//   - kids: stdio, two child processes that the router starts itself (in one test, in
//     per-client mode: child processes of their own for each client session);
//   - old: legacy HTTP+SSE (a URL ending in /sse);
//   - pair: one backend replicated over two processes (urls).
//
// and drives the router with the official Go SDK and with mcp-go, over Streamable HTTP
// and the legacy SSE endpoint, and with raw HTTP where ids must be controlled byte for
// byte: listing that reaches every item, calls that reach the backend that owns the
// tool, many sessions using the same request ids at once, progress, cancellation
// (also racing the forwarding of its request), sampling round trips, resource updates,
// and the failures a fleet lives with: backends killed under load, a backend restarted,
// a replica lost (with the resource subscription it held).
//
// Which backend answered is read from what the backends say about themselves: the log
// tool's notifications/message carry the backend's --name as logger, and each HTTP
// backend's stats://server resource (read directly, not through the router) counts its
// calls, cancellations and calls in flight. The router's own view comes from its admin
// /metrics.
//
// Only processes these tests started are ever stopped, by PID (the stdio children are
// the router's, stopped by it). Every wait is bounded; the bounds are generous, for a
// loaded machine with two cores, and say "within N seconds", never "faster than".
package fleettest
