//go:build !unix

package transport

// rawWrites: elsewhere than unix TryWrite keeps every event for Write, which the
// stream's goroutine makes (the descriptor's write call differs there).
const rawWrites = false

// rawWrite is never called where rawWrites is false.
func (k *streamSink) rawWrite(uintptr) bool { panic("transport: no raw writes here") }
