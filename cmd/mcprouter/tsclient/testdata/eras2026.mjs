// The TypeScript SDK v2 client (@modelcontextprotocol/client, which speaks 2026-07-28)
// through mcprouter in front of a backend of either era, driven by eras2026_test.go:
//   node eras2026.mjs <client package dir> <negotiation> <url> reference
//   node eras2026.mjs <client package dir> <negotiation> <url> elicit <tool> <message>
// negotiation is the client's versionNegotiation mode: "auto" (server/discover first,
// initialize if the server is not modern), "legacy" (the plain 2025 initialize, the
// client's default) or "pin:<revision>". "reference" walks the reference backend
// (mcpbackend): a tool call, a resource read, a prompt, progress, sampling, a
// subscription and its update (subscriptions/listen on 2026-07-28, resources/subscribe
// on a 2025 session) and a cancellation the backend sees; "elicit" calls a tool of the
// Go SDK's conformance server that elicits. Sampling and elicitation are answered by
// the client's own handlers (as server requests on a 2025 session, as input_required
// rounds on 2026-07-28). It prints one JSON line with what it saw; any failure exits
// non-zero with the error on stderr. With MCP_TRACE set every HTTP exchange is written
// to stderr. Every wait is bounded.
import { pathToFileURL } from "node:url";
import { run } from "./harness.mjs";

const [pkgDir, negotiation, url, mode, ...rest] = process.argv.slice(2);
const { Client, StreamableHTTPClientTransport } = await import(pathToFileURL(`${pkgDir}/dist/index.mjs`).href);

const WAIT_MS = 30000;

const negotiationMode = negotiation.startsWith("pin:") ? { pin: negotiation.slice(4) } : negotiation;
const client = new Client({ name: "ts-sdk-v2-eras", version: "1.0.0" }, {
  capabilities: { sampling: {}, elicitation: {} },
  versionNegotiation: { mode: negotiationMode },
});
client.setRequestHandler("sampling/createMessage", async (req) => ({
  model: "test-model",
  role: "assistant",
  content: { type: "text", text: "sampled: " + (req.params.messages?.[0]?.content?.text ?? "") },
}));
client.setRequestHandler("elicitation/create", async (req) => ({
  action: "accept",
  content: req.params.message?.startsWith("What is your name") ? { name: "Ada" } : { username: "ada" },
}));
const updated = [];
let onUpdated = () => {};
client.setNotificationHandler("notifications/resources/updated", (n) => { updated.push(n.params.uri); onUpdated(); });

// traced is fetch writing each request and its response status and headers to stderr
// (bodies of streams are not read here: the transport reads them).
async function traced(input, init) {
  const body = typeof init?.body === "string" ? init.body : "";
  console.error(`> ${init?.method ?? "GET"} ${input} ${JSON.stringify(Object.fromEntries(new Headers(init?.headers)))} ${body}`);
  const res = await fetch(input, init);
  console.error(`< ${res.status} ${res.headers.get("content-type") ?? ""} session=${res.headers.get("mcp-session-id") ?? ""}`);
  return res;
}
const transport = new StreamableHTTPClientTransport(new URL(url), process.env.MCP_TRACE ? { fetch: traced } : {});
const text = (res) => (res.content ?? []).filter((c) => c.type === "text").map((c) => c.text).join("");
const call = async (name, args, opts) => text(await client.callTool({ name, arguments: args }, opts));
const pause = (ms) => new Promise((r) => setTimeout(r, ms));

// until polls cond until it holds, for at most WAIT_MS; false when it never did.
async function until(cond, everyMs = 5) {
  const deadline = Date.now() + WAIT_MS;
  while (Date.now() < deadline) {
    if (await cond()) return true;
    await pause(everyMs);
  }
  return false;
}

async function stats() {
  const res = await client.readResource({ uri: "stats://server" }, { cacheMode: "bypass" });
  return JSON.parse(res.contents[0].text);
}

// updateArrives waits up to ms for a notifications/resources/updated of uri.
function updateArrives(uri, ms) {
  return new Promise((resolve) => {
    const t = setTimeout(() => resolve(false), ms);
    onUpdated = () => { if (updated.includes(uri)) { clearTimeout(t); resolve(true); } };
    onUpdated();
  });
}

// subscribe asks for the updates of uri the way the negotiated era has: a
// subscriptions/listen stream on 2026-07-28, resources/subscribe on a 2025 session.
// It returns what closes the subscription and how it was asked.
async function subscribe(uri) {
  if (client.getProtocolEra() === "modern") {
    const sub = await client.listen({ resourceSubscriptions: [uri] });
    return { how: "subscriptions/listen", honored: sub.honoredFilter, close: () => sub.close() };
  }
  await client.subscribeResource({ uri });
  return { how: "resources/subscribe", close: () => client.unsubscribeResource({ uri }) };
}

async function reference() {
  const out = {};
  out.echo = await call("echo", { text: "from typescript" });
  out.read = (await client.readResource({ uri: "echo://hello%20you" })).contents[0]?.text;
  const prompt = await client.getPrompt({ name: "greet", arguments: { name: "Ada", style: "pirate" } });
  out.prompt = prompt.messages[0]?.content?.text;

  const progress = [];
  await call("progress", { steps: 3, intervalMs: 1 }, { onprogress: (p) => progress.push(p.progress) });
  out.progress = progress;

  out.sampled = await call("sample", { prompt: "say hi" });

  // The update may race the opening of the stream it travels on: the resource is
  // touched again until an update arrives.
  const sub = await subscribe("memo://board");
  out.subscribedBy = sub.how;
  out.honored = sub.honored;
  out.updated = await until(async () => {
    await call("touch", { uri: "memo://board" });
    return updateArrives("memo://board", 200);
  }, 0);
  await sub.close();

  const before = (await stats()).cancelled;
  const abort = new AbortController();
  let started;
  const running = new Promise((r) => { started = r; });
  const cancelled = client.callTool({ name: "progress", arguments: { steps: 10000, intervalMs: 20 } },
    { signal: abort.signal, onprogress: () => started() }).then(() => false, () => true);
  await Promise.race([running, pause(WAIT_MS)]);
  abort.abort("test cancels");
  out.callRejected = await cancelled;
  out.backendCancelled = await until(async () => { const s = await stats(); return s.cancelled > before && s.inFlight === 0; });
  out.echoAfter = await call("echo", { text: "still here" });
  return out;
}

await run(async () => {
  await client.connect(transport);
  const out = mode === "elicit" ? { elicited: await call(rest[0], { message: rest[1] }) } : await reference();
  out.negotiated = client.getNegotiatedProtocolVersion() ?? null;
  out.era = client.getProtocolEra() ?? null;
  out.session = transport.sessionId ?? null;
  out.server = client.getServerVersion()?.name ?? null;
  await client.close();
  return out;
}, 90000);
