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

// TestCounterWaitWhileAdding: work may be added while someone already waits for none
// (sessions closing during a shutdown); the wait sees it through, and a Zero asked
// with nothing counted is already closed.
func TestCounterWaitWhileAdding(t *testing.T) {
	var c Counter
	select {
	case <-c.Zero():
	default:
		t.Fatal("Zero of an idle counter is not closed")
	}
	c.Add()
	zero := c.Zero()
	var wg sync.WaitGroup
	for range 50 {
		c.Add()
		wg.Add(1)
		go func() { defer wg.Done(); c.Done() }()
	}
	wg.Wait()
	select {
	case <-zero:
		t.Fatal("Zero closed while work was still counted")
	default:
	}
	if n := c.N(); n != 1 {
		t.Fatalf("N = %d with one piece of work left, want 1", n)
	}
	c.Done()
	<-zero
	select {
	case <-c.Zero():
	default:
		t.Fatal("Zero after the last Done is not closed")
	}
}

// TestCounterWaitersRace races Zero against Add and Done from many goroutines (bounded):
// every channel a waiter got closes once the last piece of work is done, whatever
// interleaving the Dones that reached 0 had with the waits.
func TestCounterWaitersRace(t *testing.T) {
	for range 200 {
		var c Counter
		var work, waiters sync.WaitGroup
		chans := make(chan (<-chan struct{}), 64)
		for range 8 {
			work.Add(1)
			go func() {
				defer work.Done()
				for range 20 {
					c.Add()
					c.Done()
				}
			}()
			waiters.Add(1)
			go func() {
				defer waiters.Done()
				for range 4 {
					chans <- c.Zero()
				}
			}()
		}
		c.Add() // held until every waiter asked, so that some wait
		waiters.Wait()
		work.Wait()
		c.Done()
		close(chans)
		for ch := range chans {
			if !Wait(ch, 10*time.Second) {
				t.Fatal("a Zero channel stayed open with nothing counted")
			}
		}
		if c.N() != 0 {
			t.Fatalf("N = %d after every Done", c.N())
		}
	}
}

// TestEvery: fn runs on every tick until stop closes, and not once after (here stop
// closes inside the third call, so Every returns with exactly three calls made).
func TestEvery(t *testing.T) {
	stop := make(chan struct{})
	calls := 0
	Every(stop, time.Millisecond, func() {
		calls++
		if calls == 3 {
			close(stop)
		}
	})
	if calls != 3 {
		t.Errorf("fn ran %d times, want 3", calls)
	}
	Every(stop, time.Hour, func() { t.Error("fn ran with stop already closed") })
}
