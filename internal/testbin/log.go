package testbin

import (
	"strings"
	"sync"
)

// maxLogLines is how many of a process's last lines a Log keeps: enough for a router's
// goroutine dump (Stop).
const maxLogLines = 1000

// Log keeps the last lines a process (or a logger) wrote, for failure messages and for
// values the test reads from them; safe for concurrent use. It is an io.Writer, so it
// serves as an exec.Cmd's Stderr or a slog handler's output.
type Log struct {
	mu    sync.Mutex
	lines []string
	part  string // an unterminated last line, completed by the next Write
}

// Add keeps one line.
func (l *Log) Add(line string) {
	l.mu.Lock()
	l.addLocked(line)
	l.mu.Unlock()
}

func (l *Log) addLocked(line string) {
	l.lines = append(l.lines, line)
	if len(l.lines) > maxLogLines {
		l.lines = l.lines[len(l.lines)-maxLogLines:]
	}
}

// Write implements io.Writer, splitting on newlines.
func (l *Log) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.part + string(p)
	for {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			break
		}
		l.addLocked(s[:i])
		s = s[i+1:]
	}
	l.part = s
	return len(p), nil
}

// String returns the kept lines.
func (l *Log) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := strings.Join(l.lines, "\n")
	if l.part != "" {
		s += "\n" + l.part
	}
	return s
}

// Count returns how many kept lines contain s.
func (l *Log) Count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, line := range l.lines {
		if strings.Contains(line, s) {
			n++
		}
	}
	return n
}

// Contains reports whether some kept line contains s.
func (l *Log) Contains(s string) bool { return l.Count(s) > 0 }

// Value returns key's value in the first kept line that contains marker ("" if none).
func (l *Log) Value(marker, key string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range l.lines {
		if strings.Contains(line, marker) {
			return LogValue(line, key)
		}
	}
	return ""
}

// LogValue extracts key=value from a slog text line ("" if absent).
func LogValue(line, key string) string {
	i := strings.Index(line, " "+key+"=")
	if i < 0 {
		return ""
	}
	v := line[i+len(key)+2:]
	if j := strings.IndexByte(v, ' '); j >= 0 {
		v = v[:j]
	}
	return strings.Trim(v, `"`)
}
