// The official TypeScript SDK client against a router with a policy, driven by
// policy_test.go:
//   node policy.mjs <sdk dir> <url> <access token> <allowed tool> <denied tool>
// It lists every tool (following the cursors), calls the allowed tool and the denied
// one, and prints one JSON line: the names it saw, the allowed call's text, and the
// denied call's error message. An unexpected failure exits non-zero.
import { run, sdkLoader, toolNames, transportFor } from "./harness.mjs";

const [sdkDir, target, token, allowed, denied] = process.argv.slice(2);
const sdk = sdkLoader(sdkDir);
const { Client } = await sdk("client/index.js");
const transport = await transportFor(sdk, "http", target, { requestInit: { headers: { Authorization: `Bearer ${token}` } } });
const client = new Client({ name: "ts-sdk-policy-test", version: "1.0.0" });
await run(async () => {
  await client.connect(transport);
  const tools = await toolNames(client);
  const res = await client.callTool({ name: allowed, arguments: { text: "from typescript" } });
  let deniedError = "";
  try {
    const r = await client.callTool({ name: denied, arguments: { text: "x" } });
    deniedError = r.isError ? `tool error: ${JSON.stringify(r.content)}` : "";
  } catch (e) {
    deniedError = String(e?.message ?? e);
  }
  await client.close();
  return { tools, echo: res.content?.[0]?.text, denied: deniedError };
});
