package fleet

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/internal/testwait"
)

// TestDrainSignalWaiters: several goroutines wait on one signal at once, each for a
// count of its own; a poke wakes them all, each counts again, and each returns once
// its own count is 0; one whose context ends returns false.
func TestDrainSignalWaiters(t *testing.T) {
	var d drainSignal
	var counts [3]atomic.Int32
	done := make(chan int, len(counts))
	for i := range counts {
		counts[i].Store(1)
		go func() {
			if d.wait(context.Background(), func() int { return int(counts[i].Load()) }) {
				done <- i
			}
		}()
	}
	ctx, cancel := context.WithCancel(context.Background())
	gaveUp := make(chan bool, 1)
	go func() { gaveUp <- d.wait(ctx, func() int { return 1 }) }()
	testwait.For(t, "four waiters", 10*time.Second, func() bool { return d.waiters.Load() == 4 })

	for i := range counts {
		counts[i].Store(0)
		d.poke()
		if got := testwait.Recv(t, "the waiter whose count went to 0", 10*time.Second, done); got != i {
			t.Fatalf("waiter %d returned when waiter %d's count went to 0", got, i)
		}
	}
	cancel()
	if testwait.Recv(t, "the waiter whose context ended", 10*time.Second, gaveUp) {
		t.Fatal("a wait whose count never went to 0 returned true")
	}
	if n := d.waiters.Load(); n != 0 {
		t.Fatalf("%d waiters left registered", n)
	}
}

// TestDrainSignalNoLostWakeup: the count's last decrease (and its poke) lands after
// the waiter read the count, before it waits: the waiter must still wake. The count
// makes it happen so, deterministically; a signal that took its channel or registered
// its waiter after counting would wait for a poke that never comes.
func TestDrainSignalNoLostWakeup(t *testing.T) {
	var d drainSignal
	n := 1
	count := func() int { // called on the waiter's goroutine only
		seen := n
		if n > 0 {
			n--
			d.poke()
		}
		return seen
	}
	done := make(chan bool, 1)
	go func() { done <- d.wait(context.Background(), count) }()
	if !testwait.Recv(t, "the waiter after its count went to 0 unseen", 10*time.Second, done) {
		t.Fatal("wait returned false")
	}
}

// TestDrainSignalRace races decreases and pokes with waiters registering and counting
// (for the race detector); every waiter returns.
func TestDrainSignalRace(t *testing.T) {
	var d drainSignal
	for range 200 {
		var n atomic.Int32
		n.Store(2)
		done := make(chan bool, 2)
		for range 2 {
			go func() { done <- d.wait(context.Background(), func() int { return int(n.Load()) }) }()
		}
		for range 2 {
			n.Add(-1)
			d.poke()
		}
		for range 2 {
			if !testwait.Recv(t, "the waiters after the count went to 0", 10*time.Second, done) {
				t.Fatal("wait returned false")
			}
		}
	}
}

// BenchmarkDrainPokeIdle is the cost a poke adds to every settle of the in-flight table
// while nobody waits: one atomic load.
func BenchmarkDrainPokeIdle(b *testing.B) {
	var d drainSignal
	for b.Loop() {
		d.poke()
	}
}

// TestSpawnDuringStop: work spawned while stop waits (a backend's reader goroutine
// handing off a list_changed during Close) neither races the WaitGroup's Wait (the race
// detector reported it) nor is lost: every function runs.
func TestSpawnDuringStop(t *testing.T) {
	const spawners, each = 4, 20
	for round := 0; round < 50; round++ {
		l := newLifecycle()
		var ran atomic.Int64
		start := make(chan struct{})
		var wg sync.WaitGroup
		for range spawners {
			wg.Go(func() {
				<-start
				for range each {
					l.spawn(func() { ran.Add(1) })
				}
			})
		}
		close(start)
		l.stop()
		wg.Wait()
		testwait.For(t, "every spawned function to run", 10*time.Second, func() bool { return ran.Load() == spawners*each })
	}
}
