// Package modern holds the per-request semantics of MCP 2026-07-28 ("modern" MCP: no
// sessions, no initialize, every request carrying its protocol version and client
// capabilities in params._meta) as pure functions over raw bytes, so that the
// transport, the router and the reference backend apply one set of rules.
//
// It owns:
//
//   - reading a request's per-request _meta (ReadMeta) and judging it (Check): missing
//     keys, unsupported versions, undeclared client capabilities and unknown or removed
//     methods, each with the specification's JSON-RPC code and HTTP status (Reject);
//   - the Mcp-Method / Mcp-Name / MCP-Protocol-Version headers checked against the body,
//     the =?base64?...?= form included (Checker.Check, CheckHeaders, MatchParam);
//   - the method table of the revision (LookupMethod): what exists, what was removed,
//     what may answer input_required, what is cacheable;
//   - the result decorations: resultType and serverInfo added to a result in place
//     (AppendDecorated), the server/discover result (AppendDiscoverResult), the caching
//     fields merged over several backends (Cache);
//   - requestState sealing for translation (Sealer): AEAD, bound to a principal, a TTL
//     and a digest of the original request;
//   - the translation tables between the 2025 revisions and this one (Mappings,
//     CodeMappings, ToModern, ToLegacy, ErrorToModern, ErrorToLegacy), and the wire
//     encoders of translation: per-request _meta spliced into a forwarded request
//     (AppendWithMeta), InputRequiredResult built and read (AppendInputRequired,
//     EachInputRequest), the retry of a request with inputResponses and requestState
//     (AppendRetry), a header value in the revision's encoding (AppendHeaderValue).
//
// Who calls it: the Streamable HTTP transport (headers, HTTP statuses of a Reject),
// the router's lifecycle (Check, discover, decorations), the fleet (translation,
// Sealer, Cache) and cmd/mcpbackend, which serves both eras with the same code. It
// touches no socket and keeps no state besides a Sealer's key.
//
// Everything that runs per request works on views of a message codec.Scan has already
// validated and allocates nothing (benchmarks with -benchmem, alloc guards in tests).
package modern
