//go:build !linux

package compare

import (
	"syscall"
	"time"
)

// childAttr: no parent-death signal outside Linux; the harness stops its children itself.
func childAttr() *syscall.SysProcAttr { return nil }

// procCPU is not available: results then leave the server CPU columns empty.
func procCPU(int) (time.Duration, error) { return 0, errNoProc }

// cpuTimes is not available: the "other load" columns stay empty.
func cpuTimes([]int) (busy, total time.Duration, err error) { return 0, 0, errNoProc }

// allowedCPUs is unknown: the harness does not pin.
func allowedCPUs() []int { return nil }

func cpuModel() string      { return "unknown" }
func loadAverage() string   { return "" }
func kernelRelease() string { return "" }
