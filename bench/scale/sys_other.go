//go:build !linux

package scale

import "syscall"

// childAttr: elsewhere children are ended by the command's cleanup only.
func childAttr() *syscall.SysProcAttr { return nil }

// readSyscalls: counted on Linux only (none here).
func readSyscalls(int) (sysc, error) { return sysc{}, nil }
