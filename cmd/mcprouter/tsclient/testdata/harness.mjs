// What the TypeScript SDK client scripts share: loading the SDK from the directory the
// Go test names, the transport of each kind, one bounded run that prints one JSON line,
// and the paged tool list.
import { pathToFileURL } from "node:url";

// sdkLoader returns the import of a module of the SDK installed at sdkDir
// ("client/index.js", "types.js", ...).
export const sdkLoader = (sdkDir) => (p) => import(pathToFileURL(`${sdkDir}/dist/esm/${p}`).href);

// transportFor builds the SDK's client transport of kind: "http" (Streamable HTTP) or
// "sse" (legacy HTTP+SSE) to the URL target with the transport options opts, or
// "stdio": the command target run with the argument stdio.
export async function transportFor(sdk, kind, target, opts = {}) {
  if (kind === "http") {
    const { StreamableHTTPClientTransport } = await sdk("client/streamableHttp.js");
    return new StreamableHTTPClientTransport(new URL(target), opts);
  }
  if (kind === "sse") {
    const { SSEClientTransport } = await sdk("client/sse.js");
    return new SSEClientTransport(new URL(target), opts);
  }
  const { StdioClientTransport } = await sdk("client/stdio.js");
  return new StdioClientTransport({ command: target, args: ["stdio"], stderr: "ignore" });
}

// run runs main for at most limitMs and prints the JSON of what it returns, exiting 0;
// a failure exits 1 with the error on stderr, and a run past the limit exits 3.
export async function run(main, limitMs = 30000) {
  const timer = setTimeout(() => { console.error("timed out"); process.exit(3); }, limitMs);
  try {
    const out = await main();
    console.log(JSON.stringify(out));
    clearTimeout(timer);
    process.exit(0);
  } catch (e) {
    console.error(e?.stack ?? String(e));
    process.exit(1);
  }
}

// toolNames lists the name of every tool client sees, following the cursors (at most
// 100 pages).
export async function toolNames(client) {
  const tools = [];
  let cursor;
  for (let i = 0; i < 100; i++) {
    const page = await client.listTools(cursor ? { cursor } : {});
    tools.push(...page.tools.map((t) => t.name));
    cursor = page.nextCursor;
    if (!cursor) break;
  }
  return tools;
}
