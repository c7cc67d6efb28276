// Package policy decides who may do what through the router: CEL rules over the
// principal and the MCP request, the list filter derived from the same rules, MCP-aware
// rate limits shared across a cluster over NATS, and the audit line and counters of
// every decision.
//
// It owns the `policy:` section of the configuration (Config), its compilation (New
// compiles every CEL expression once; a reload is a new Engine) and the state of the
// rate limits. It knows nothing of sockets or of the catalog: the router hands it a
// Subject (the authenticated principal, prepared once per token: NewSubject), an Input
// (the peeked request: FromMessage, ParseInput) or an Item (a catalog entry), and gets a
// Decision, a visibility or a limit verdict back.
//
// Who calls it, and on which goroutine:
//
//   - Engine.Decide, then Engine.Take, run on the goroutine that dispatches the request,
//     once the router knows the backend and before the dispatcher hands the request to
//     it; one call each per element of a batch. A denial's JSON-RPC message is
//     Decision.Message; a limited request's error data is codec.AppendRetryData of
//     Verdict.RetryAfter.
//   - Engine.View (Visible, Mask) and Engine.Digest run on the goroutine that answers a
//     */list call, or that recomputes the views after a catalog or policy change (to
//     send list_changed only to the principals whose view changed).
//   - Engine.Audit runs where the request ends (its outcome and latency known).
//   - Sync runs its own goroutine: it publishes this instance's rate-limit consumption
//     on NATS every interval, and the NATS client's goroutine applies the other
//     instances' consumption to the local buckets.
//
// Every exported method is safe for concurrent use (an Input is one request's, used by
// one goroutine). An Engine is immutable once built, apart from its caches: per
// principal view (the principal's attributes that the rules read), the visibility of
// catalog items, the lists' bitsets and each call's plan (what each rule says of the
// call apart from its arguments), all in one bounded cache (Config.ViewCache) that a
// reload (a new Engine) starts afresh. The Limiter's buckets live in a bounded, sharded
// table that outlives reloads.
//
// The semantics outside users rely on (issue 14):
//
//   - a matching deny rule always wins; when any allow rule exists, a request matching
//     none is denied; an evaluation error is a denial (fail closed) and is reported;
//   - the rules decide tools/call, prompts/get, resources/read, resources/subscribe (and
//     each entry of a 2026-07-28 subscriptions/listen, decided as the resources/subscribe
//     of its URI) and completion/complete; every other method (initialize, ping,
//     notifications, the list methods...) is allowed for an authenticated principal;
//   - a list shows an item exactly when some call to it would be allowed (see Visible
//     for what that means for rules over mcp.arguments).
package policy
