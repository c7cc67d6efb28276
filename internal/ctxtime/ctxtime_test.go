package ctxtime

import (
	"context"
	"testing"
	"time"
)

func TestSleep(t *testing.T) {
	if !Sleep(context.Background(), time.Millisecond) {
		t.Error("a sleep with a live context reported it was cut short")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	// An hour: only the cancelled context can end this sleep.
	if Sleep(ctx, time.Hour) {
		t.Error("a sleep with a done context reported it slept fully")
	}
}
