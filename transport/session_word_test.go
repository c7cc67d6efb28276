package transport

import (
	"errors"
	"strconv"
	"sync"
	"testing"
)

// TestSessionWord: a session's revision, its flags and its count of calls share one
// word (Session.calls) without disturbing each other, and setState binds a session once,
// its revision with it.
func TestSessionWord(t *testing.T) {
	reg := quietRegistry(t, RegistryConfig{})
	s := mustCreate(t, reg, CarrierStdio, "")
	if s.Version() != "" || s.State() != nil || s.Closed() || s.HandedOver() || s.Ready() || s.busy() {
		t.Fatalf("a new unbound session: version %q state %v closed %v handed over %v ready %v busy %v",
			s.Version(), s.State(), s.Closed(), s.HandedOver(), s.Ready(), s.busy())
	}
	s.beginCall()
	s.MarkReady()
	if err := s.setState("2025-06-18", "state"); err != nil {
		t.Fatal(err)
	}
	if err := s.setState("2025-11-25", "other"); !errors.Is(err, ErrAlreadyBound) {
		t.Fatalf("second setState: %v, want ErrAlreadyBound", err)
	}
	if s.Version() != "2025-06-18" || s.State() != "state" || !s.Ready() || !s.busy() || s.Closed() {
		t.Fatalf("bound with a call in flight: version %q state %v ready %v busy %v closed %v",
			s.Version(), s.State(), s.Ready(), s.busy(), s.Closed())
	}
	s.endCall()
	s.closeWith(1000)
	s.closeWith(0) // again: no change
	if !s.Closed() || !s.HandedOver() || s.busy() || !s.Ready() || s.Version() != "2025-06-18" {
		t.Fatalf("closed at shutdown: closed %v handed over %v busy %v ready %v version %q",
			s.Closed(), s.HandedOver(), s.busy(), s.Ready(), s.Version())
	}
	if err := s.Send([]byte("{}")); !errors.Is(err, ErrSessionClosed) {
		t.Fatalf("Send on a closed session: %v", err)
	}

	legacy := mustCreate(t, reg, CarrierLegacySSE, LegacyVersion)
	legacy.Close()
	legacy.closeWith(1000) // a shutdown's close after the client's: the client's stands
	if !legacy.Closed() || legacy.HandedOver() || legacy.Version() != LegacyVersion {
		t.Fatalf("closed, then closed at shutdown: closed %v handed over %v version %q", legacy.Closed(), legacy.HandedOver(), legacy.Version())
	}
	if d := reg.discarded("id", CarrierStreamable, "2025-06-18", "state"); !d.Closed() || !d.HandedOver() ||
		d.Version() != "2025-06-18" || d.State() != "state" || d.ID() != "id" {
		t.Fatalf("discarded: closed %v handed over %v version %q state %v", d.Closed(), d.HandedOver(), d.Version(), d.State())
	}
}

// TestSessionVersions: a registry numbers each revision once, whichever session brings
// it and however many bring it at once, and refuses to bind a session to one past
// maxVersions rather than report another revision for it.
func TestSessionVersions(t *testing.T) {
	reg := quietRegistry(t, RegistryConfig{MaxPerClient: -1})
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Go(func() {
			v := "2025-0" + strconv.Itoa(1+i%4) + "-01"
			s, err := reg.create(CarrierStreamable, v, i, nopOutput{})
			if err != nil {
				t.Errorf("session %d: %v", i, err)
				return
			}
			if s.Version() != v || s.State() != i {
				t.Errorf("session %d: version %q state %v", i, s.Version(), s.State())
			}
		})
	}
	wg.Wait()
	if n := len(reg.versions.list()); n != 4 {
		t.Fatalf("%d revisions numbered for 4: %q", n, reg.versions.list())
	}
	for i := 4; i < maxVersions-1; i++ {
		if _, err := reg.create(CarrierStreamable, "v"+strconv.Itoa(i), nil, nopOutput{}); err != nil {
			t.Fatalf("revision %d: %v", i+1, err)
		}
	}
	if _, err := reg.create(CarrierStreamable, "one too many", nil, nopOutput{}); !errors.Is(err, ErrTooManyVersions) {
		t.Fatalf("revision %d: %v, want ErrTooManyVersions", maxVersions, err)
	}
	s := mustCreate(t, reg, CarrierStdio, "")
	if err := s.setState("one too many", "state"); !errors.Is(err, ErrTooManyVersions) || s.State() != nil {
		t.Fatalf("setState past the bound: %v, state %v", err, s.State())
	}
	if s, err := reg.create(CarrierStreamable, "2025-03-01", nil, nopOutput{}); err != nil || s.Version() != "2025-03-01" {
		t.Fatalf("a numbered revision after the bound: %v %q", err, s.Version())
	}
}

// quietRegistry is a registry whose sessions never expire, closed with the test.
func quietRegistry(t *testing.T, cfg RegistryConfig) *Registry {
	cfg.IdleTimeout, cfg.InitTimeout = -1, -1
	reg := NewRegistry(cfg, nil)
	t.Cleanup(reg.Close)
	return reg
}

// mustCreate opens an unbound session of carrier at version in reg.
func mustCreate(t *testing.T, reg *Registry, carrier Carrier, version string) *Session {
	t.Helper()
	s, err := reg.create(carrier, version, nil, nopOutput{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// BenchmarkSessionOpen opens and closes a bound session (what every initialize does to
// the registry): the cost of keeping its revision and state in the session.
func BenchmarkSessionOpen(b *testing.B) {
	reg := NewRegistry(RegistryConfig{IdleTimeout: -1, InitTimeout: -1, MaxSessions: 1 << 20}, nil)
	b.Cleanup(reg.Close)
	state := new(int)
	b.ReportAllocs()
	for b.Loop() {
		s, err := reg.create(CarrierStreamable, "2025-11-25", state, nopOutput{})
		if err != nil || s.Version() != "2025-11-25" || s.State() != state {
			b.Fatal(err)
		}
		s.Close()
	}
}
