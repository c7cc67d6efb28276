package cluster

import (
	"os"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/internal/testwait"
)

// TestSamplerUntilStop: a sampler takes a sample at once and then one a period, each
// with the usage of the processes it was given, in time order; Stop returns them and no
// sample is taken after it.
func TestSamplerUntilStop(t *testing.T) {
	s := StartSampler(map[string]ProcRef{"self": {PID: os.Getpid()}}, time.Millisecond)
	testwait.For(t, "three samples", 10*time.Second, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.samples) >= 3
	})
	got := s.Stop()
	if len(got) < 3 {
		t.Fatalf("%d samples, want 3 at least", len(got))
	}
	for i, smp := range got {
		if u, ok := smp.Usage["self"]; !ok || u.RSS <= 0 {
			t.Errorf("sample %d: usage %+v (present %v), want this process's", i, u, ok)
		}
		if i > 0 && smp.At.Before(got[i-1].At) {
			t.Errorf("sample %d taken before sample %d", i, i-1)
		}
	}
	s.mu.Lock()
	after := len(s.samples)
	s.mu.Unlock()
	if after != len(got) {
		t.Errorf("%d samples after Stop, %d when it returned", after, len(got))
	}
}
