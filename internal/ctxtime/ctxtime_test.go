package ctxtime

import (
	"context"
	"sync"
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

func TestWait(t *testing.T) {
	closed := make(chan struct{})
	close(closed)
	// An hour: only the closed channel can end this wait.
	if !Wait(closed, time.Hour) {
		t.Error("a closed channel reported as not closed")
	}
	if Wait(make(chan struct{}), time.Millisecond) {
		t.Error("an open channel reported as closed")
	}
}

func TestWaitGroup(t *testing.T) {
	var wg sync.WaitGroup
	if !WaitGroup(&wg, time.Hour) {
		t.Error("an empty WaitGroup reported as not done")
	}
	wg.Add(1)
	if WaitGroup(&wg, time.Millisecond) {
		t.Error("a pending WaitGroup reported as done")
	}
	wg.Done() // lets the waiting goroutine end
}
