// The official TypeScript SDK client against a router with a policy, driven by
// policy_test.go:
//   node policy.mjs <sdk dir> <url> <access token> <allowed tool> <denied tool>
// It lists every tool (following the cursors), calls the allowed tool and the denied
// one, and prints one JSON line: the names it saw, the allowed call's text, and the
// denied call's error message. An unexpected failure exits non-zero.
import { pathToFileURL } from "node:url";

const [sdkDir, target, token, allowed, denied] = process.argv.slice(2);
const sdk = (p) => import(pathToFileURL(`${sdkDir}/dist/esm/${p}`).href);
const { Client } = await sdk("client/index.js");
const { StreamableHTTPClientTransport } = await sdk("client/streamableHttp.js");

const transport = new StreamableHTTPClientTransport(new URL(target), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
});
const client = new Client({ name: "ts-sdk-policy-test", version: "1.0.0" });
const timer = setTimeout(() => { console.error("timed out"); process.exit(3); }, 30000);
try {
  await client.connect(transport);
  const tools = [];
  let cursor;
  for (let i = 0; i < 100; i++) {
    const page = await client.listTools(cursor ? { cursor } : {});
    tools.push(...page.tools.map((t) => t.name));
    cursor = page.nextCursor;
    if (!cursor) break;
  }
  const res = await client.callTool({ name: allowed, arguments: { text: "from typescript" } });
  let deniedError = "";
  try {
    const r = await client.callTool({ name: denied, arguments: { text: "x" } });
    deniedError = r.isError ? `tool error: ${JSON.stringify(r.content)}` : "";
  } catch (e) {
    deniedError = String(e?.message ?? e);
  }
  await client.close();
  console.log(JSON.stringify({ tools, echo: res.content?.[0]?.text, denied: deniedError }));
  clearTimeout(timer);
  process.exit(0);
} catch (e) {
  console.error(e?.stack ?? String(e));
  process.exit(1);
}
