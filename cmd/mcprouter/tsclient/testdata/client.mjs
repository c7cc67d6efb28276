// A real MCP client from the official TypeScript SDK, driven by tsclient_test.go:
//   node client.mjs <sdk dir> <transport: http|sse|stdio> <url or router binary>
// It connects, lists tools across pages, calls an echo tool, pings, and prints one JSON
// line with what it saw; any failure exits non-zero with the error on stderr.
import { run, sdkLoader, toolNames, transportFor } from "./harness.mjs";

const [sdkDir, kind, target] = process.argv.slice(2);
const sdk = sdkLoader(sdkDir);
const { Client } = await sdk("client/index.js");

const transport = await transportFor(sdk, kind, target);

const client = new Client({ name: "ts-sdk-test", version: "1.0.0" });
await run(async () => {
  await client.connect(transport);
  const tools = await toolNames(client);
  const echoName = tools.find((n) => n.endsWith("echo"));
  const res = await client.callTool({ name: echoName, arguments: { text: "from typescript" } });
  await client.ping();
  const out = {
    negotiated: transport.protocolVersion ?? null,
    server: client.getServerVersion()?.name,
    tools: tools.length,
    echo: res.content?.[0]?.text,
  };
  await client.close();
  return out;
});
