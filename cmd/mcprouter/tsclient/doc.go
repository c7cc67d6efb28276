// Package tsclient tests mcprouter with the official TypeScript SDK client over
// Streamable HTTP, legacy HTTP+SSE and stdio, and with the SDK's v2 client (which
// speaks 2026-07-28) over Streamable HTTP. It holds only tests.
package tsclient
