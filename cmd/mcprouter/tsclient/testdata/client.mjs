// A real MCP client from the official TypeScript SDK, driven by tsclient_test.go:
//   node client.mjs <sdk dir> <transport: http|sse|stdio> <url or router binary>
// It connects, lists tools across pages, calls an echo tool, pings, and prints one JSON
// line with what it saw; any failure exits non-zero with the error on stderr.
import { pathToFileURL } from "node:url";

const [sdkDir, kind, target] = process.argv.slice(2);
const sdk = (p) => import(pathToFileURL(`${sdkDir}/dist/esm/${p}`).href);
const { Client } = await sdk("client/index.js");

let transport;
if (kind === "http") {
  const { StreamableHTTPClientTransport } = await sdk("client/streamableHttp.js");
  transport = new StreamableHTTPClientTransport(new URL(target));
} else if (kind === "sse") {
  const { SSEClientTransport } = await sdk("client/sse.js");
  transport = new SSEClientTransport(new URL(target));
} else {
  const { StdioClientTransport } = await sdk("client/stdio.js");
  transport = new StdioClientTransport({ command: target, args: ["stdio"], stderr: "ignore" });
}

const client = new Client({ name: "ts-sdk-test", version: "1.0.0" });
const timer = setTimeout(() => { console.error("timed out"); process.exit(3); }, 30000);
try {
  await client.connect(transport);
  const tools = [];
  let cursor;
  do {
    const page = await client.listTools(cursor ? { cursor } : {});
    tools.push(...page.tools.map((t) => t.name));
    cursor = page.nextCursor;
  } while (cursor);
  const echoName = tools.find((n) => n.endsWith("echo"));
  const res = await client.callTool({ name: echoName, arguments: { text: "from typescript" } });
  await client.ping();
  console.log(JSON.stringify({
    negotiated: transport.protocolVersion ?? null,
    server: client.getServerVersion()?.name,
    tools: tools.length,
    echo: res.content?.[0]?.text,
  }));
  await client.close();
  clearTimeout(timer);
  process.exit(0);
} catch (e) {
  console.error(e?.stack ?? String(e));
  process.exit(1);
}
