// Package fleet is the backend side of mcprouter: it connects to every configured MCP
// server (Streamable HTTP, legacy SSE, stdio child processes), keeps their merged catalog
// of tools, prompts, resources and templates, and forwards client requests to the backend
// that owns them, rewriting ids, names and progress tokens in the bytes.
//
// Fleet (fleet.go) is a thin facade that implements router.Fleet and wires the parts
// below, one job each, one file each:
//
//	config.go                 the configuration and its defaults
//	backends.go               backends and their instances: picking, concurrency slots,
//	                          keeping the shared upstream session up, health checks
//	upstream.go               one upstream session: handshake, the router's own calls,
//	                          what the backend sends and its connection events
//	catalog.go                the merged lists: fetch, merge, names and routes, pages
//	routing.go                Prepare: answers from the catalog or routes to a backend
//	inflight.go               the in-flight table: the state machine of a forwarded request
//	forward.go                forwarding: Run's send, the backend's answers, expiry
//	upsessions.go             per-client upstream sessions and their cap
//	serverreq.go              backends' requests to clients (sampling, roots, elicitation)
//	notices.go                notifications: progress, logging, list_changed, cancellation
//	subscriptions.go          resources/subscribe per instance, shared upstream subscriptions
//	subscriptions_cluster.go  the same across router instances, over NATS JetStream
//	observe.go                reports to the router's Observer, views for metrics
package fleet
