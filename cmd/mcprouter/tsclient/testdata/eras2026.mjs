// The TypeScript SDK v2 client (@modelcontextprotocol/client, which speaks 2026-07-28)
// through mcprouter in front of a backend of either era, driven by eras2026_test.go:
//   node eras2026.mjs <client package dir> <negotiation> <url> reference
//   node eras2026.mjs <client package dir> <negotiation> <url> elicit <tool> <message>
// negotiation is the client's versionNegotiation mode: "auto" (server/discover first,
// initialize if the server is not modern), "legacy" (the plain 2025 initialize, the
// client's default) or "pin:<revision>" (2026-07-28 or later: the client refuses to pin
// a 2025 revision). It takes the steps of walk.mjs; a subscription is
// subscriptions/listen on 2026-07-28 and resources/subscribe on a 2025 session.
// Sampling and elicitation are answered by the client's own handlers: as server
// requests on a 2025 session, as the input_required rounds of the call on 2026-07-28.
// It prints one JSON line with what it saw (the revision, the era, the session if
// any); any failure exits non-zero with the error on stderr. With MCP_TRACE set, every
// HTTP request and the status of its response are written to stderr. Every wait is
// bounded.
import { pathToFileURL } from "node:url";
import { run } from "./harness.mjs";
import { elicit, sample, text, updateTracker, walk } from "./walk.mjs";

const [pkgDir, negotiation, url, mode, ...rest] = process.argv.slice(2);
const { Client, StreamableHTTPClientTransport } = await import(pathToFileURL(`${pkgDir}/dist/index.mjs`).href);

const client = new Client({ name: "ts-sdk-v2-eras", version: "1.0.0" }, {
  capabilities: { sampling: {}, elicitation: {} },
  versionNegotiation: { mode: negotiation.startsWith("pin:") ? { pin: negotiation.slice(4) } : negotiation },
});
client.setRequestHandler("sampling/createMessage", sample);
client.setRequestHandler("elicitation/create", elicit);
const updates = updateTracker();
client.setNotificationHandler("notifications/resources/updated", (n) => updates.seen(n.params.uri));

// traced is fetch writing each request and the status of its response to stderr (the
// transport reads the bodies of the responses).
async function traced(input, init) {
  const body = typeof init?.body === "string" ? init.body : "";
  console.error(`> ${init?.method ?? "GET"} ${input} ${JSON.stringify(Object.fromEntries(new Headers(init?.headers)))} ${body}`);
  const res = await fetch(input, init);
  console.error(`< ${res.status} ${res.headers.get("content-type") ?? ""} session=${res.headers.get("mcp-session-id") ?? ""}`);
  return res;
}
const transport = new StreamableHTTPClientTransport(new URL(url), process.env.MCP_TRACE ? { fetch: traced } : {});

const c = {
  client,
  updates,
  call: async (name, args, opts) => text(await client.callTool({ name, arguments: args }, opts)),
  // subscribe asks for the updates of uri the way the negotiated era has.
  subscribe: async (uri) => {
    if (client.getProtocolEra() === "modern") {
      const sub = await client.listen({ resourceSubscriptions: [uri] });
      return { how: "subscriptions/listen", close: () => sub.close() };
    }
    await client.subscribeResource({ uri });
    return { how: "resources/subscribe", close: () => client.unsubscribeResource({ uri }) };
  },
};
await run(() => walk(c, transport, mode, rest, () => ({
  negotiated: client.getNegotiatedProtocolVersion() ?? null,
  era: client.getProtocolEra() ?? null,
  session: transport.sessionId ?? null,
})), 90000);
