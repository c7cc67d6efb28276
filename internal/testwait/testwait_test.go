package testwait

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

func TestPoll(t *testing.T) {
	var n atomic.Int32
	if !Poll(10*time.Second, func() bool { return n.Add(1) == 5 }) {
		t.Fatal("a condition that holds at the fifth look was not seen")
	}
	start := time.Now()
	if Poll(30*time.Millisecond, func() bool { return false }) {
		t.Fatal("a condition that never holds was reported held")
	}
	if time.Since(start) < 30*time.Millisecond {
		t.Error("Poll gave up before its time")
	}
}

func TestFor(t *testing.T) {
	done := make(chan struct{})
	go func() { close(done) }()
	For(t, "the goroutine", 10*time.Second, func() bool {
		select {
		case <-done:
			return true
		default:
			return false
		}
	})
}

func TestRecv(t *testing.T) {
	ch := make(chan int, 1)
	ch <- 7
	if v := Recv(t, "the value", time.Second, ch); v != 7 {
		t.Errorf("Recv = %d, want 7", v)
	}
}

// Cleanup runs stop at the end of the test with a context that ends after the limit:
// a stop that waits for its context returns once the limit has passed.
func TestCleanup(t *testing.T) {
	var err error
	t.Run("inner", func(t *testing.T) {
		Cleanup(t, 20*time.Millisecond, func(ctx context.Context) error {
			<-ctx.Done()
			err = ctx.Err()
			return err
		})
	})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("stop saw %v, want the deadline", err)
	}
}
