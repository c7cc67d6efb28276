package logsafe

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestSession(t *testing.T) {
	id := "0123456789abcdef0123456789abcdef"
	h := Session(id)
	if len(h) != 12 || strings.Contains(id, h) || Session(id) != h || Session(id+"x") == h {
		t.Errorf("Session(%q) = %q: want 12 stable hex digits not taken from the id", id, h)
	}
	if Session("") != "" {
		t.Error("an empty id should stay empty")
	}
}

func TestLimited(t *testing.T) {
	var buf bytes.Buffer
	l := NewLimited(slog.NewTextHandler(&buf, nil), 2, 3)
	clock := time.Unix(1000, 0)
	l.bucket.now = func() time.Time { return clock }
	log := slog.New(l).With("backend", "b")
	for i := 0; i < 10; i++ {
		log.Warn("bad request")
	}
	if n := strings.Count(buf.String(), "bad request"); n != 3 {
		t.Fatalf("%d lines passed a burst of 3:\n%s", n, buf.String())
	}
	if l.Suppressed() != 7 {
		t.Errorf("suppressed = %d, want 7", l.Suppressed())
	}
	clock = clock.Add(time.Second) // two tokens
	buf.Reset()
	for i := 0; i < 5; i++ {
		log.Warn("bad request")
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "suppressed=7") || strings.Contains(lines[1], "suppressed") || !strings.Contains(lines[0], "backend=b") {
		t.Errorf("after a second: want 2 lines, the first reporting 7 suppressed:\n%s", buf.String())
	}
}

func TestLimitWarnings(t *testing.T) {
	var buf bytes.Buffer
	log := LimitWarnings(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})), 1, 2)
	for i := 0; i < 10; i++ {
		log.Debug("request received")
		log.Warn("cannot save")
	}
	if n := strings.Count(buf.String(), "request received"); n != 10 {
		t.Errorf("%d debug lines of 10 passed: below warnings nothing is limited", n)
	}
	if n := strings.Count(buf.String(), "cannot save"); n != 2 {
		t.Errorf("%d warnings passed a burst of 2", n)
	}
}
