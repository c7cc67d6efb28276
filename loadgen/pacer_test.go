package loadgen

import (
	"testing"
	"time"
)

// TestPacerSchedule checks that the pacer emits exactly the tickets of its window, in
// order, at their intended times (no ticket early by more than the oversleep guess).
func TestPacerSchedule(t *testing.T) {
	base := time.Now()
	clock := func() int64 { return int64(time.Since(base)) }
	stop := make(chan struct{})
	const rate = 1000.0
	t0 := clock() + int64(10*time.Millisecond)
	end := t0 + int64(200*time.Millisecond)
	p := newPacer(clock, preciseSleep, t0, end, rate, stop)
	go p.run()
	var n int64
	late := 0
	for tk := range p.out {
		if tk.seq != n {
			t.Fatalf("ticket %d out of order (want %d)", tk.seq, n)
		}
		if want := t0 + int64(float64(n)*1e9/rate); tk.intended != want {
			t.Fatalf("ticket %d intended %d, want %d", n, tk.intended, want)
		}
		now := clock()
		if early := tk.intended - now; early > int64(maxOversleep) {
			t.Errorf("ticket %d released %v early", n, time.Duration(early))
		}
		if now-tk.intended > int64(time.Millisecond) {
			late++
		}
		n++
	}
	if n != 200 {
		t.Fatalf("%d tickets, want 200", n)
	}
	t.Logf("%d of %d tickets handed over more than 1ms late (machine load)", late, n)
}

func TestPacerStop(t *testing.T) {
	base := time.Now()
	clock := func() int64 { return int64(time.Since(base)) }
	stop := make(chan struct{})
	p := newPacer(clock, preciseSleep, 0, int64(time.Hour), 0.01, stop) // one ticket every 100s
	done := make(chan struct{})
	go func() { p.run(); close(done) }()
	<-p.out // ticket 0 is due at once
	close(stop)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("pacer did not stop")
	}
}
