// The official TypeScript SDK client through mcprouter in front of a backend of either
// era, driven by eras_test.go:
//   node eras.mjs <sdk dir> <url> reference
//   node eras.mjs <sdk dir> <url> elicit <tool> <message>
// It takes the steps of walk.mjs ("reference": the reference backend, mcpbackend;
// "elicit": a tool of the Go SDK's conformance server that elicits); sampling and
// elicitation are answered by the client's own handlers. It prints one JSON line with
// what it saw; any failure exits non-zero with the error on stderr. Every wait is
// bounded.
import { run, sdkLoader, transportFor } from "./harness.mjs";
import { elicit, sample, text, updateTracker, walk } from "./walk.mjs";

const [sdkDir, url, mode, ...rest] = process.argv.slice(2);
const sdk = sdkLoader(sdkDir);
const { Client } = await sdk("client/index.js");
const { CreateMessageRequestSchema, ElicitRequestSchema, ResourceUpdatedNotificationSchema } = await sdk("types.js");

const client = new Client({ name: "ts-sdk-eras", version: "1.0.0" }, { capabilities: { sampling: {}, elicitation: {} } });
client.setRequestHandler(CreateMessageRequestSchema, sample);
client.setRequestHandler(ElicitRequestSchema, elicit);
const updates = updateTracker();
client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => updates.seen(n.params.uri));

const transport = await transportFor(sdk, "http", url);
const c = {
  client,
  updates,
  call: async (name, args, opts) => text(await client.callTool({ name, arguments: args }, undefined, opts)),
  // The SDK opens its GET stream, where updates travel, in the background after
  // initialize.
  subscribe: async (uri) => {
    await client.subscribeResource({ uri });
    return { how: "resources/subscribe", close: async () => {} };
  },
};
await run(() => walk(c, transport, mode, rest, () => ({ negotiated: transport.protocolVersion ?? null })), 90000);
