package scale

import "syscall"

// childAttr makes a child die with the command, whatever ends it.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
