// Package tsclient tests mcprouter with the official TypeScript SDK client over
// Streamable HTTP, legacy HTTP+SSE and stdio. It holds only tests.
package tsclient
