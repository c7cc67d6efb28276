package server

import (
	"strconv"
	"sync"
)

// Reply buffers come from a pool; the transports copy what they are given, so a buffer
// goes back as soon as Reply or Send returns. Buffers grown past maxPooledBuf (a big
// payload) are dropped rather than pooled, so that one large reply does not pin memory.
const maxPooledBuf = 64 << 10

var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

func getBuf() *[]byte { return bufPool.Get().(*[]byte) }

func putBuf(bp *[]byte) {
	if cap(*bp) > maxPooledBuf {
		return
	}
	*bp = (*bp)[:0]
	bufPool.Put(bp)
}

// beginResult appends the head of a success response up to the start of the result
// value: {"jsonrpc":"2.0","id":<id>,"result":  — the caller appends the result and '}'.
// Building the result in place saves a second buffer and a copy on every reply.
func beginResult(dst, id []byte) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	if id == nil {
		return append(dst, `null,"result":`...)
	}
	dst = append(dst, id...)
	return append(dst, `,"result":`...)
}

// appendTextContent appends a content array holding one text block whose text is the
// JSON string token tok (already quoted and escaped).
func appendTextContent(dst, tok []byte) []byte {
	dst = append(dst, `[{"type":"text","text":`...)
	dst = append(dst, tok...)
	return append(dst, `}]`...)
}

func appendInt(dst []byte, n int64) []byte { return strconv.AppendInt(dst, n, 10) }
