// Package server is mcpbackend's MCP server: a fast reference backend for demos, tests and
// benchmarks, built on the project's own codec and transports rather than on an SDK, so
// that what it measures is the wire and not a reflection-based framework.
//
// It offers a fixed catalog chosen to exercise everything a router must carry:
//
//   - tools: echo, sleep, payload, fail (isError result), fail_rpc (JSON-RPC error),
//     progress (notifications/progress), sample (a sampling/createMessage round trip to
//     the client), touch (changes a resource), log (notifications/message), and
//     Config.ExtraTools generated echo-like tools tool_0001... for catalog tests;
//   - resources: counter://tick (changes every Config.Tick), memo://board and
//     Config.ExtraResources item://NNNN (change when the touch tool names them), with
//     resources/subscribe and notifications/resources/updated;
//   - resource templates echo://{text} and bytes://{n};
//   - prompts greet and summarize, with arguments and completions;
//   - logging/setLevel, ping, notifications/cancelled (sleep, progress and sample stop and
//     send no response).
//
// Every list is paginated with Config.PageSize and an opaque cursor.
//
// # Transports
//
// Server implements transport.Handler, and Listen (or ServeListener) and ServeStdio put it
// behind the project's Streamable HTTP (/mcp), legacy HTTP+SSE (/sse, /message) and stdio
// servers. The MCP logic itself does not
// depend on them: it is reached through Serve, which takes a scanned message, a Session
// and a Responder (the three operations any transport offers: reply, finish without
// reply, send a related message first), and through Initialize (with a Binder that
// records the new Session), NewSession / CloseSession and AppendInitializeResult for the
// lifecycle. That is the seam a NATS service (a later `--nats URL`) plugs into: it keeps
// one Session per client session it learns of, answers initialize through Initialize,
// and hands every other message to Serve with a Responder that publishes on the
// request's reply subject.
//
// # Eras
//
// Config.Eras chooses the protocol generations: the 2025 revisions (initialize, sessions),
// MCP 2026-07-28, or both on the same endpoints (the default), decided per request. A
// request that claims 2026-07-28 (its _meta or the MCP-Protocol-Version header) is served
// statelessly (modern.go): a Session lives as long as the request and holds what its _meta
// declares; results carry resultType, serverInfo and caching fields; sampling is an
// input_required round trip with a sealed requestState; resource updates flow on
// subscriptions/listen streams. On HTTP such requests are answered in front of the 2025
// endpoints (modern_http.go: the revision's statuses, JSON or SSE, a closed stream cancels);
// on stdio and NATS they come through HandleMessage (modern_conn.go). The rules are
// router/modern's, which the router applies too.
//
// # Faults
//
// Config.Faults (--fault) makes the backend hostile on purpose, for tests of what a
// router does with one (fault.go): each fault adds a tool, fault_<name>, that answers
// byte by byte, too large, cut off or not in JSON, under an id it was never given,
// twice, never, or after a flood of notifications. The slow one needs the wire itself
// and is played in front of the transports (fault_wire.go); the others go through the
// Responder like any tool. The default catalog has none of them.
//
// # Hot path
//
// tools/call of echo never builds a JSON tree: the codec's scan gives params and the tool
// name, a small peek over the (already validated) arguments object finds the text token,
// which is copied verbatim into a response appended in a pooled buffer.
package server
