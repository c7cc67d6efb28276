// Package testio holds the I/O pieces tests share: the reader that shows a parser's
// result does not depend on how the network splits a stream, the buffer that
// collects a process's or a logger's output while the test reads it, and the proxy
// that shows a test what a router sends its backend. Only tests import it.
package testio

import "io"

// ChunkReader hands out B at most N bytes per Read, then io.EOF. Reset lets a
// benchmark reuse one without allocating.
type ChunkReader struct {
	B []byte
	N int
}

// NewChunkReader reads b in pieces of at most n bytes.
func NewChunkReader(b []byte, n int) *ChunkReader { return &ChunkReader{B: b, N: n} }

// Reset makes r read b in pieces of at most n bytes.
func (r *ChunkReader) Reset(b []byte, n int) { r.B, r.N = b, n }

func (r *ChunkReader) Read(p []byte) (int, error) {
	if len(r.B) == 0 {
		return 0, io.EOF
	}
	n := min(len(p), r.N, len(r.B))
	copy(p, r.B[:n])
	r.B = r.B[n:]
	return n, nil
}
