package transport

import (
	"sync"
	"testing"
	"unsafe"

	"github.com/mcprouter/mcprouter/internal/testsize"
)

// TestSessionSize: a Session stays within the 128-byte size class on 64-bit platforms
// (one per session; at 136 bytes it took 144), a call within the 112-byte one (a held
// listen stream keeps its call for its whole life: it took 144), a session's streams
// within 64 (96 with a map of its reply streams), a held stream's sink within 96 (128
// with a raw write function and its arguments of its own).
func TestSessionSize(t *testing.T) {
	testsize.Within(t,
		testsize.Max{Name: "Session", Size: unsafe.Sizeof(Session{}), Max: 128},
		testsize.Max{Name: "call", Size: unsafe.Sizeof(call{}), Max: 112},
		testsize.Max{Name: "streamableOut", Size: unsafe.Sizeof(streamableOut{}), Max: 64},
		testsize.Max{Name: "getStream", Size: unsafe.Sizeof(getStream{}), Max: 96})
}

// TestSessionReadyAndCalls: the ready flag and the count of calls in flight share one
// word without disturbing each other.
func TestSessionReadyAndCalls(t *testing.T) {
	reg := NewRegistry(RegistryConfig{IdleTimeout: -1, InitTimeout: -1}, nil)
	t.Cleanup(reg.Close)
	s, err := reg.create(CarrierStreamable, "2025-11-25", nil, nopOutput{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Ready() || s.busy() {
		t.Fatal("a new session is ready or busy")
	}
	s.beginCall()
	s.MarkReady()
	if !s.Ready() || !s.busy() {
		t.Fatalf("one call in flight after MarkReady: ready %v busy %v", s.Ready(), s.busy())
	}
	s.endCall()
	if !s.Ready() || s.busy() {
		t.Fatalf("no call in flight: ready %v busy %v", s.Ready(), s.busy())
	}
	s.MarkReady() // again: no change
	if !s.Ready() || s.busy() {
		t.Fatal("a second MarkReady changed the session")
	}
}

// TestSessionDoneLazy: a session makes its done channel only when asked for it, and
// whoever asks, before the session ends, after, or at the same time as it ends, gets a
// channel that is closed once it has ended.
func TestSessionDoneLazy(t *testing.T) {
	closedNow := func(c <-chan struct{}) bool {
		select {
		case <-c:
			return true
		default:
			return false
		}
	}
	open := func() *Session {
		reg := NewRegistry(RegistryConfig{IdleTimeout: -1, InitTimeout: -1}, nil)
		t.Cleanup(reg.Close)
		s, err := reg.create(CarrierStreamable, "2025-11-25", nil, nopOutput{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}

	s := open()
	if s.done.Load() != nil {
		t.Fatal("a new session made its done channel before anyone asked")
	}
	before := s.Done()
	if closedNow(before) || s.Done() != before {
		t.Fatal("Done of a live session: closed, or another channel each time")
	}
	s.Close()
	if !closedNow(before) || !closedNow(s.Done()) {
		t.Fatal("Done not closed once the session ended")
	}

	s = open()
	s.Close()
	if !closedNow(s.Done()) {
		t.Fatal("Done asked for after the end is not closed")
	}

	for i := 0; i < 100; i++ {
		s = open()
		var wg sync.WaitGroup
		got := make([]<-chan struct{}, 4)
		for k := range got {
			wg.Add(1)
			go func() { defer wg.Done(); got[k] = s.Done() }()
		}
		s.Close()
		wg.Wait()
		for _, c := range got {
			if !closedNow(c) {
				t.Fatal("Done asked for while the session ended is never closed")
			}
		}
	}
}

// nopOutput is a sessionOutput that delivers nothing.
type nopOutput struct{}

func (nopOutput) send([]byte) error { return nil }
func (nopOutput) close(int)         {}
