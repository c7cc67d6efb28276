package testio

import (
	"bytes"
	"sync"
)

// Buffer collects what a process, a command or a logger writes while the test reads it
// (polling for a line, or at the end): a bytes.Buffer safe for concurrent use. With Max
// set it keeps the first Max bytes and drops the rest, so that a chatty run cannot
// fill the test's memory.
type Buffer struct {
	Max int // bytes kept at the most; 0: no bound

	mu sync.Mutex
	b  bytes.Buffer
}

// Write implements io.Writer; it never fails (past Max it drops p and reports it
// written).
func (w *Buffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.Max > 0 && w.b.Len()+len(p) > w.Max {
		return len(p), nil
	}
	return w.b.Write(p)
}

// String returns what was kept so far.
func (w *Buffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}
