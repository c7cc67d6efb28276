// The official TypeScript SDK client against a router that authenticates its clients,
// driven by auth_test.go:
//   node auth.mjs <sdk dir> <transport: http|sse> <url> <access token, or - for none>
// With a token, its OAuth provider hands the token to the transport: the client connects,
// calls the echo tool and pings. Without one, the SDK runs its authorization flow from the
// router's 401: it reads the challenge, the protected resource metadata and the
// authorization server's metadata, and asks to send the user to the authorization URL,
// which this script records instead of opening; the connection then fails unauthorized.
// It prints one JSON line with what it saw; an unexpected failure exits non-zero.
import { run, sdkLoader, transportFor } from "./harness.mjs";

const [sdkDir, kind, target, token] = process.argv.slice(2);
const sdk = sdkLoader(sdkDir);
const { Client } = await sdk("client/index.js");
const { UnauthorizedError, discoverOAuthProtectedResourceMetadata } = await sdk("client/auth.js");

let authorizationURL = null;
const authProvider = {
  get redirectUrl() { return "http://127.0.0.1:1/callback"; },
  get clientMetadata() { return { client_name: "ts-sdk-auth-test", redirect_uris: ["http://127.0.0.1:1/callback"] }; },
  clientInformation() { return { client_id: "ts-sdk-auth-test" }; },
  tokens() { return token === "-" ? undefined : { access_token: token, token_type: "Bearer" }; },
  saveTokens() {},
  redirectToAuthorization(url) { authorizationURL = url.toString(); },
  saveCodeVerifier() {},
  codeVerifier() { return "verifier"; },
};

const transport = await transportFor(sdk, kind, target, { authProvider });

const client = new Client({ name: "ts-sdk-auth-test", version: "1.0.0" });
await run(async () => {
  try {
    await client.connect(transport);
  } catch (e) {
    if (token !== "-" || !(e instanceof UnauthorizedError)) throw e;
    const meta = await discoverOAuthProtectedResourceMetadata(new URL(target));
    return { unauthorized: true, authorizationURL, resource: meta.resource, authorizationServers: meta.authorization_servers };
  }
  const { tools } = await client.listTools();
  const echoName = tools.find((t) => t.name.endsWith("echo"))?.name;
  const res = await client.callTool({ name: echoName, arguments: { text: "from typescript" } });
  await client.ping();
  await client.close();
  return { unauthorized: false, server: client.getServerVersion()?.name, echo: res.content?.[0]?.text };
});
