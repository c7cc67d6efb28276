package main

import (
	"strings"
	"sync"
)

// lockedBuffer collects a process's output lines for failure messages; safe for
// concurrent use. It keeps the last maxLines lines.
type lockedBuffer struct {
	mu    sync.Mutex
	lines []string
}

const maxLines = 200

func (b *lockedBuffer) WriteLine(s string) {
	b.mu.Lock()
	b.lines = append(b.lines, s)
	if len(b.lines) > maxLines {
		b.lines = b.lines[len(b.lines)-maxLines:]
	}
	b.mu.Unlock()
}

// Write implements io.Writer (for exec.Cmd.Stderr), splitting on newlines.
func (b *lockedBuffer) Write(p []byte) (int, error) {
	for _, l := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		b.WriteLine(l)
	}
	return len(p), nil
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Join(b.lines, "\n")
}

// contains reports whether some line contains s.
func (b *lockedBuffer) contains(s string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, l := range b.lines {
		if strings.Contains(l, s) {
			return true
		}
	}
	return false
}
