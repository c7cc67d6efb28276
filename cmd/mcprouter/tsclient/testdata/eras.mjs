// The official TypeScript SDK client through mcprouter in front of a backend of either
// era, driven by eras_test.go:
//   node eras.mjs <sdk dir> <url> reference
//   node eras.mjs <sdk dir> <url> elicit <tool> <message>
// "reference" walks the reference backend (mcpbackend): a tool call, a resource read, a
// subscription and its update, a prompt, progress, sampling and a cancellation the
// backend sees; "elicit" calls a tool of the Go SDK's conformance server that elicits.
// Sampling and elicitation are answered by the client's own handlers. It prints one JSON
// line with what it saw; any failure exits non-zero with the error on stderr. Every wait
// is bounded.
import { run, sdkLoader, transportFor } from "./harness.mjs";

const [sdkDir, url, mode, ...rest] = process.argv.slice(2);
const sdk = sdkLoader(sdkDir);
const { Client } = await sdk("client/index.js");
const { CreateMessageRequestSchema, ElicitRequestSchema, ResourceUpdatedNotificationSchema } = await sdk("types.js");

const WAIT_MS = 30000;

const client = new Client({ name: "ts-sdk-eras", version: "1.0.0" }, { capabilities: { sampling: {}, elicitation: {} } });
client.setRequestHandler(CreateMessageRequestSchema, async (req) => ({
  model: "test-model",
  role: "assistant",
  content: { type: "text", text: "sampled: " + (req.params.messages?.[0]?.content?.text ?? "") },
}));
client.setRequestHandler(ElicitRequestSchema, async (req) => ({
  action: "accept",
  content: req.params.message?.startsWith("What is your name") ? { name: "Ada" } : { username: "ada" },
}));
const updated = [];
let onUpdated = () => {};
client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => { updated.push(n.params.uri); onUpdated(); });

const transport = await transportFor(sdk, "http", url);
const text = (res) => (res.content ?? []).filter((c) => c.type === "text").map((c) => c.text).join("");
const call = async (name, args, opts) => text(await client.callTool({ name, arguments: args }, undefined, opts));
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
  const res = await client.readResource({ uri: "stats://server" });
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

async function reference() {
  const out = {};
  out.echo = await call("echo", { text: "from typescript" });
  out.read = (await client.readResource({ uri: "echo://hello%20you" })).contents[0]?.text;
  const prompt = await client.getPrompt({ name: "greet", arguments: { name: "Ada", style: "pirate" } });
  out.prompt = prompt.messages[0]?.content?.text;

  const progress = [];
  await call("progress", { steps: 3, intervalMs: 1 }, { onprogress: (p) => progress.push(p.progress) });
  // The notifications travel before the result on the request's stream.
  out.progress = progress;

  out.sampled = await call("sample", { prompt: "say hi" });

  // The SDK opens its GET stream, where updates travel, in the background after
  // initialize: the resource is touched again until an update arrives.
  await client.subscribeResource({ uri: "memo://board" });
  out.updated = await until(async () => {
    await call("touch", { uri: "memo://board" });
    return updateArrives("memo://board", 200);
  }, 0);

  const before = (await stats()).cancelled;
  const abort = new AbortController();
  let started;
  const running = new Promise((r) => { started = r; });
  const cancelled = client.callTool({ name: "progress", arguments: { steps: 10000, intervalMs: 20 } }, undefined,
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
  out.negotiated = transport.protocolVersion ?? null;
  out.server = client.getServerVersion()?.name;
  await client.close();
  return out;
}, 90000);
