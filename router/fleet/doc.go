// Package fleet is the backend side of mcprouter: it connects to every configured MCP
// server (Streamable HTTP, legacy SSE, stdio child processes), keeps their merged catalog
// of tools, prompts, resources and templates, and forwards client requests to the backend
// that owns them, rewriting ids, names and progress tokens in the bytes.
//
// Fleet (fleet.go) is a thin facade: it implements router.Fleet, builds the parts below
// and wires them (New), starts and stops them (Start, Close), and hands each call and
// each backend event to the part it concerns. Each part is a type that owns its state;
// its doc comment says what it owns, who may call it and on which goroutine. A part that
// needs another gets it as a field of that part's own type (or a function), never the
// Fleet.
//
//	config.go                 Config, BackendConfig and their defaults
//	lifecycle.go              lifecycle: the fleet's context and its background goroutines
//	backends.go               backend, instance: picking, concurrency slots, the shared
//	                          upstream session kept up and health-checked (upkeep)
//	upstream.go               upConn, one upstream session; connector opens them (the one
//	                          place a session learns whom it speaks for); connEvents
//	era.go                    an instance's era: 2025 session or 2026-07-28 without one,
//	                          discovered, pinned, re-checked; a request's per-request _meta
//	listen.go                 listener: a 2026-07-28 instance's subscriptions/listen stream
//	listen_client.go          a 2026-07-28 client's subscriptions/listen stream, fed by the
//	                          merged catalog's changes and the subscriptions
//	listen_principal.go       the same for a per-client 2025 backend's resources, on the
//	                          principal's own upstream session (re-opened when it dies)
//	modern_client.go          the stateless (2026-07-28) clients' side: discover, listen,
//	                          cancellation, per-request sessions
//	modern_meta.go            the per-request _meta keys cut on the way to a 2025 backend
//	paramheaders.go           Mcp-Param-* headers checked against the called tool
//	mrtr.go, mrtr_table.go    a 2025 backend's question as input_required with a sealed
//	                          requestState, and the retry that answers it
//	mrtr_owner.go             a retry another router instance owns, relayed over NATS
//	reverse.go                a 2026-07-28 backend's input_required asked of a 2025 client
//	translate.go              a 2026-07-28 backend's answers as a 2025 client is told them
//	catalog.go                catalog: an immutable snapshot of the merged lists, routes, pages
//	catalog_build.go          catalogBuilder: fetches lists, builds and swaps snapshots
//	catalog_hints.go          tool annotations the retry rules read (read-only, idempotent)
//	routing.go                routing: Prepare's answers from the catalog, routes to backends
//	inflight.go               table: the in-flight table, the state machine of a request
//	forward.go                forwarder: track, send, answers, cancellation, expiry
//	forward_retry.go          sending again on another replica when it is safe
//	forward_failover.go       a dead replica's requests in flight, sent again or failed
//	tracing.go                the backend call's span and trace context
//	policy*.go                the rules, limits, filtered lists and listen entries of the
//	                          policy, per endpoint (virtual servers)
//	sessions.go               sessions: client sessions' state, per-client upstream
//	                          sessions and their cap
//	sessions_principal.go     a 2026-07-28 principal's upstream sessions; the reaper
//	sessions_caps.go          2026-07-28 clients' sessions with shared 2025 backends,
//	                          by the capabilities they declared
//	serverreq.go              serverRequests: backends' requests to clients (sampling,
//	                          roots, elicitation) and their answers
//	notices.go                notices: notifications both ways, broadcast and fan-out
//	loglevel.go               a 2025 session's log level applied to backends' messages
//	bus.go                    changeBus: list changes told to and heard from other routers
//	subscriptions.go          subscriber, localSubs, subsUpstream: resources/subscribe
//	subscriptions_cluster.go  clusterSubs: the same across router instances, over JetStream
//	subscriptions_presence.go who holds an upstream subscription, and whether it is alive
//	subscriptions_index.go    sessionKeys: each session's subscriptions, a slice per session
//	subscriptions_lease.go    a lease the store did not take, tried again soon
//	upkeep_reconfigure*.go    live reconfiguration: backends added, replaced, removed, and
//	                          the subscriptions of the retired ones
//	observe.go                reporter: finished requests to the Observer; metrics views
package fleet
