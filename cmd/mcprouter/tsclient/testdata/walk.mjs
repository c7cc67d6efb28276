// The walk of eras.mjs (the v1 SDK client) and eras2026.mjs (the v2 client): the same
// steps against the same backends, whichever client takes them. A client is given as
// { client, call, subscribe, updates }: client is the SDK's Client (readResource,
// getPrompt, connect, close), call(name, args, opts) calls a tool and returns its text,
// subscribe(uri) asks for the updates of uri and returns { how, close }, and updates is
// the updateTracker its notification handler feeds. The client's sampling and
// elicitation handlers are sample and elicit.

export const WAIT_MS = 30000;

export const pause = (ms) => new Promise((r) => setTimeout(r, ms));

// text joins the text content of a tool result.
export const text = (res) => (res.content ?? []).filter((c) => c.type === "text").map((c) => c.text).join("");

// until polls cond until it holds, for at most WAIT_MS; false when it never did.
export async function until(cond, everyMs = 5) {
  const deadline = Date.now() + WAIT_MS;
  while (Date.now() < deadline) {
    if (await cond()) return true;
    await pause(everyMs);
  }
  return false;
}

// updateTracker records the URIs of notifications/resources/updated (seen, called by
// the client's handler) and tells when one arrives.
export function updateTracker() {
  const uris = [];
  let onSeen = () => {};
  return {
    seen(uri) { uris.push(uri); onSeen(); },
    // arrives waits up to ms for an update of uri (true), or one seen already.
    arrives(uri, ms) {
      return new Promise((resolve) => {
        const t = setTimeout(() => resolve(false), ms);
        onSeen = () => { if (uris.includes(uri)) { clearTimeout(t); resolve(true); } };
        onSeen();
      });
    },
  };
}

// sample is the client's sampling handler: it answers with the first message's text.
export const sample = async (req) => ({
  model: "test-model",
  role: "assistant",
  content: { type: "text", text: "sampled: " + (req.params.messages?.[0]?.content?.text ?? "") },
});

// elicit is the client's elicitation handler: it accepts with the name the conformance
// server's tools ask for.
export const elicit = async (req) => ({
  action: "accept",
  content: req.params.message?.startsWith("What is your name") ? { name: "Ada" } : { username: "ada" },
});

// Reads bypass the v2 client's response cache (the v1 client has none and ignores the
// option): the backend's counters are read again and again.
const read = (client, uri) => client.readResource({ uri }, { cacheMode: "bypass" });

// reference walks the reference backend (mcpbackend): a tool call, a resource read, a
// prompt, progress, sampling, a subscription and its update, and a cancellation the
// backend sees (its stats://server counts it and nothing stays in flight).
export async function reference({ client, call, subscribe, updates }) {
  const stats = async () => JSON.parse((await read(client, "stats://server")).contents[0].text);
  const out = {};
  out.echo = await call("echo", { text: "from typescript" });
  out.read = (await read(client, "echo://hello%20you")).contents[0]?.text;
  const prompt = await client.getPrompt({ name: "greet", arguments: { name: "Ada", style: "pirate" } });
  out.prompt = prompt.messages[0]?.content?.text;

  const progress = [];
  await call("progress", { steps: 3, intervalMs: 1 }, { onprogress: (p) => progress.push(p.progress) });
  // The notifications travel before the result on the request's stream.
  out.progress = progress;

  out.sampled = await call("sample", { prompt: "say hi" });

  // The update may race the opening of the stream it travels on (the v1 SDK opens its
  // GET stream in the background after initialize): the resource is touched again
  // until an update arrives.
  const sub = await subscribe("memo://board");
  out.subscribedBy = sub.how;
  out.updated = await until(async () => {
    await call("touch", { uri: "memo://board" });
    return updates.arrives("memo://board", 200);
  }, 0);
  await sub.close();

  const before = (await stats()).cancelled;
  const abort = new AbortController();
  let started;
  const running = new Promise((r) => { started = r; });
  const cancelled = call("progress", { steps: 10000, intervalMs: 20 }, { signal: abort.signal, onprogress: () => started() })
    .then(() => false, () => true);
  await Promise.race([running, pause(WAIT_MS)]);
  abort.abort("test cancels");
  out.callRejected = await cancelled;
  out.backendCancelled = await until(async () => { const s = await stats(); return s.cancelled > before && s.inFlight === 0; });
  out.echoAfter = await call("echo", { text: "still here" });
  return out;
}

// walk connects client over transport, takes the steps of mode ("reference", or
// "elicit" with the tool and its message in rest: one call of a tool that elicits) and
// returns what it saw with the fields describe() adds after the walk.
export async function walk(c, transport, mode, rest, describe) {
  await c.client.connect(transport);
  const out = mode === "elicit" ? { elicited: await c.call(rest[0], { message: rest[1] }) } : await reference(c);
  Object.assign(out, describe(), { server: c.client.getServerVersion()?.name ?? null });
  await c.client.close();
  return out;
}
