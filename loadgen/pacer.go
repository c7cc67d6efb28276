package loadgen

import (
	"runtime"
	"time"
)

// ticket is one open-loop arrival: the seq-th operation, meant to start at intended
// (nanoseconds on the run clock).
type ticket struct {
	seq      int64
	intended int64
	// blocked says that no session was waiting for work when the ticket fell due.
	blocked bool
}

// pacer releases open-loop tickets at t0 + seq/rate, for seq = 0, 1, ... until end.
//
// One goroutine paces the whole run and hands each due ticket to whichever session
// worker is free. This keeps the schedule exact however many sessions there are: a
// ticket's intended time never moves, so when every session is busy the ticket waits,
// and its wait is part of the latency measured from the intended time (which is what
// corrects coordinated omission). Sleeps use preciseSleep, aimed short of the target
// by an estimate of the usual oversleep so that sends start on time rather than late.
type pacer struct {
	clock    func() int64
	sleep    func(time.Duration)
	t0, end  int64
	interval float64 // nanoseconds between tickets
	out      chan ticket
	stop     <-chan struct{}
}

func newPacer(clock func() int64, sleep func(time.Duration), t0, end int64, rate float64, stop <-chan struct{}) *pacer {
	return &pacer{clock: clock, sleep: sleep, t0: t0, end: end, interval: 1e9 / rate, out: make(chan ticket), stop: stop}
}

// sleepSlice is the longest single sleep of the pacer.
const sleepSlice = 50 * time.Millisecond

// maxOversleep bounds the oversleep estimate.
const maxOversleep = int64(2 * time.Millisecond)

// run emits the tickets and closes out when the schedule ends or stop closes.
func (p *pacer) run() {
	defer close(p.out)
	oversleep := int64(50 * time.Microsecond) // refined as the run goes
	for seq := int64(0); ; seq++ {
		t := ticket{seq: seq, intended: p.t0 + int64(float64(seq)*p.interval)}
		if t.intended >= p.end {
			return
		}
		if wait := t.intended - p.clock(); wait > oversleep {
			// The workers woken by the last handoffs may sit in this goroutine's P.
			// Yield it to them now: if the pacer went to sleep in a system call, they
			// would wait for the runtime to take the P back, which can take
			// milliseconds. (Back-to-back handoffs need no yield: the next one
			// blocks, or a worker is already running.)
			runtime.Gosched()
			target := t.intended - oversleep
			// Long waits (low rates) are cut into slices so that stop is noticed.
			for d := target - p.clock(); d > int64(sleepSlice); d = target - p.clock() {
				p.sleep(sleepSlice)
				select {
				case <-p.stop:
					return
				default:
				}
			}
			p.sleep(time.Duration(target - p.clock()))
			// Exponentially weighted estimate of how late sleeps wake up.
			late := p.clock() - target
			oversleep += (late - oversleep) / 8
			oversleep = min(max(oversleep, 0), maxOversleep)
		}
		select {
		case p.out <- t:
			continue
		case <-p.stop:
			return
		default:
		}
		t.blocked = true
		select {
		case p.out <- t:
		case <-p.stop:
			return
		}
	}
}
