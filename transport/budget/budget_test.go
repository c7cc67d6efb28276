package budget

import (
	"errors"
	"sync"
	"testing"
)

// TestShareAndLimit: an account takes up to its share, the budget up to its limit;
// releases give room back; Close gives everything back once.
func TestShareAndLimit(t *testing.T) {
	b := New(100, 60)
	a1, a2 := b.Account(), b.Account()
	if !a1.TryReserve(60) || a1.TryReserve(1) {
		t.Fatalf("share: used %d after 60 and 1 more", a1.Used())
	}
	if !a2.TryReserve(40) || a2.TryReserve(1) {
		t.Fatalf("global limit: a2 used %d, budget %d", a2.Used(), b.Used())
	}
	if b.Used() != 100 {
		t.Fatalf("budget used %d, want 100", b.Used())
	}
	a1.Release(10)
	if !a2.TryReserve(10) || b.Used() != 100 {
		t.Fatalf("released room not given to another: used %d", b.Used())
	}
	a1.Close()
	a1.Release(50) // after Close: a no-op
	if b.Used() != 50 || a1.TryReserve(1) {
		t.Fatalf("after Close: budget used %d, want 50; closed account must take nothing", b.Used())
	}
	a2.Add(-50)
	if b.Used() != 0 || a2.Used() != 0 {
		t.Fatalf("after releasing all: budget %d, account %d", b.Used(), a2.Used())
	}
}

// TestReserveReclaims: Reserve asks the session to give back its oldest data until the
// bytes fit, and fails with ErrOverBudget when they cannot (more than the share, or
// nothing more to give back).
func TestReserveReclaims(t *testing.T) {
	b := New(1000, 100)
	a := b.Account()
	held := []int64{30, 30, 30} // retained items, oldest first
	for _, n := range held {
		if err := a.Reserve(n); err != nil {
			t.Fatal(err)
		}
	}
	a.SetReclaim(reclaimFunc(func(need int64) bool {
		if len(held) == 0 {
			return false
		}
		a.Release(held[0])
		held = held[1:]
		return true
	}))
	if err := a.Reserve(50); err != nil {
		t.Fatalf("Reserve with reclaimable data: %v", err)
	}
	if len(held) != 1 || a.Used() != 80 {
		t.Errorf("after reclaim: %d items held, used %d; want the two oldest given back, 80", len(held), a.Used())
	}
	held = append(held, 50)
	if err := a.Reserve(101); !errors.Is(err, ErrOverBudget) {
		t.Errorf("more than the share: %v, want ErrOverBudget", err)
	}
	if err := a.Reserve(100); err != nil || len(held) != 0 || a.Used() != 100 {
		t.Fatalf("Reserve of the whole share: %v, %d held", err, len(held))
	}
	if err := a.Reserve(1); !errors.Is(err, ErrOverBudget) {
		t.Errorf("nothing left to reclaim: %v, want ErrOverBudget", err)
	}
	if b.Refused.Load() != 2 {
		t.Errorf("Refused = %d, want 2", b.Refused.Load())
	}
}

// TestNil: no budget accounts nothing and refuses nothing.
func TestNil(t *testing.T) {
	b := New(0, 0)
	a := b.Account()
	if b != nil || a != nil {
		t.Fatal("New(0) should be nil, and its accounts")
	}
	if err := a.Reserve(1 << 40); err != nil || !a.TryReserve(1) || a.Used() != 0 || b.Used() != 0 {
		t.Fatal("a nil account must accept everything and count nothing")
	}
	a.Release(1)
	a.Close()
	a.SetReclaim(nil)
}

// TestConcurrent: many goroutines reserving and releasing leave the counters exact.
func TestConcurrent(t *testing.T) {
	b := New(1<<20, 1<<10)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := b.Account()
			for i := 0; i < 1000; i++ {
				if a.TryReserve(100) {
					a.Release(100)
				}
				a.TryReserve(7)
			}
			if a.Used() > 1<<10 {
				t.Errorf("account over its share: %d", a.Used())
			}
			a.Close()
		}()
	}
	wg.Wait()
	if b.Used() != 0 {
		t.Errorf("budget used %d after every account closed, want 0", b.Used())
	}
}

// BenchmarkReserveRelease is the budget's cost per retained event.
func BenchmarkReserveRelease(b *testing.B) {
	a := New(1<<30, 1<<20).Account()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		a.TryReserve(512)
		a.Release(512)
	}
}

// reclaimFunc is a function as a budget Reclaimer, for the tests (the transport's
// sessions and streams are Reclaimers themselves).
type reclaimFunc func(need int64) bool

func (f reclaimFunc) Reclaim(need int64) bool { return f(need) }
