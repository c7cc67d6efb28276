// Package logsafe keeps what the router logs safe to keep: session ids appear as short
// hashes (a log reader must not be able to take a session over), and lines a client or a
// child process can provoke at will are rate-limited (they must not flood the log or
// the disk under attack).
package logsafe

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Session is the form of a session id in logs: 12 hex digits of its SHA-256, enough to
// follow one session through the log, useless to impersonate it.
func Session(id string) string {
	if id == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:6])
}

// Limited is a slog.Handler passing at most Burst records at once and PerSecond records a
// second on average (a token bucket) to the handler it wraps; the rest are dropped and
// counted, and the next record passed says how many with the attribute "suppressed".
// Safe for concurrent use; handlers derived with WithAttrs and WithGroup share its
// bucket.
type Limited struct {
	h      slog.Handler
	bucket *bucket
	floor  slog.Level // records below pass without spending tokens
}

// NewLimited wraps h. perSecond <= 0 means 10, burst <= 0 means 20.
func NewLimited(h slog.Handler, perSecond float64, burst int) *Limited {
	if perSecond <= 0 {
		perSecond = 10
	}
	if burst <= 0 {
		burst = 20
	}
	return &Limited{h: h, bucket: &bucket{lim: rate.NewLimiter(rate.Limit(perSecond), burst), now: time.Now}, floor: slog.Level(-1 << 20)}
}

// Logger is a logger writing through a Limited wrapper of l's handler.
func Logger(l *slog.Logger, perSecond float64, burst int) *slog.Logger {
	return slog.New(NewLimited(l.Handler(), perSecond, burst))
}

// LimitWarnings is a logger that rate-limits l's warnings and errors only: the lines a
// client can provoke by failing requests on purpose. Debug and info lines (a request
// log asked for by the operator) pass unlimited.
func LimitWarnings(l *slog.Logger, perSecond float64, burst int) *slog.Logger {
	h := NewLimited(l.Handler(), perSecond, burst)
	h.floor = slog.LevelWarn
	return slog.New(h)
}

// Enabled implements slog.Handler.
func (l *Limited) Enabled(ctx context.Context, level slog.Level) bool {
	return l.h.Enabled(ctx, level)
}

// Handle implements slog.Handler.
func (l *Limited) Handle(ctx context.Context, r slog.Record) error {
	if r.Level < l.floor {
		return l.h.Handle(ctx, r)
	}
	ok, suppressed := l.bucket.take()
	if !ok {
		return nil
	}
	if suppressed > 0 {
		r = r.Clone()
		r.AddAttrs(slog.Uint64("suppressed", suppressed))
	}
	return l.h.Handle(ctx, r)
}

// WithAttrs implements slog.Handler.
func (l *Limited) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &Limited{h: l.h.WithAttrs(attrs), bucket: l.bucket, floor: l.floor}
}

// WithGroup implements slog.Handler.
func (l *Limited) WithGroup(name string) slog.Handler {
	return &Limited{h: l.h.WithGroup(name), bucket: l.bucket, floor: l.floor}
}

// Suppressed is the number of records dropped and not yet reported.
func (l *Limited) Suppressed() uint64 {
	l.bucket.mu.Lock()
	defer l.bucket.mu.Unlock()
	return l.bucket.dropped
}

// bucket is the token bucket (golang.org/x/time/rate) with the count of records it
// refused since the last one it let through.
type bucket struct {
	lim     *rate.Limiter
	now     func() time.Time
	mu      sync.Mutex
	dropped uint64
}

// take spends a token if there is one, and then returns the drops to report.
func (b *bucket) take() (ok bool, suppressed uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.lim.AllowN(b.now(), 1) {
		b.dropped++
		return false, 0
	}
	suppressed, b.dropped = b.dropped, 0
	return true, suppressed
}
