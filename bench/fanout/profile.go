package fanout

import (
	"errors"
	"os"
	"runtime/pprof"
)

// cpuProfile is a CPU profile of this process written to a file while it runs: the
// clients' profile (harness) and the in-process servers' one (Servers) are both one.
// The zero value is stopped. Not safe for concurrent use: the owner serializes.
type cpuProfile struct {
	f *os.File // nil while stopped
}

// start creates path and starts profiling into it.
func (p *cpuProfile) start(path string) error {
	if p.f != nil {
		return errors.New("fanout: a CPU profile is running already")
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return err
	}
	p.f = f
	return nil
}

// stop ends the profile and closes its file; it does nothing while stopped.
func (p *cpuProfile) stop() error {
	if p.f == nil {
		return nil
	}
	pprof.StopCPUProfile()
	err := p.f.Close()
	p.f = nil
	return err
}
