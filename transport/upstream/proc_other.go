//go:build !unix

package upstream

import (
	"os"
	"os/exec"
	"syscall"
)

// setProcGroup does nothing where there are no process groups.
func setProcGroup(cmd *exec.Cmd) {}

// signalGroup signals the child alone: without process groups, only a kill is portable.
func signalGroup(p *os.Process, sig syscall.Signal) error {
	if sig == syscall.SIGKILL {
		return p.Kill()
	}
	return p.Signal(sig)
}
