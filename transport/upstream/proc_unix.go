//go:build unix

package upstream

import (
	"os"
	"os/exec"
	"syscall"
)

// setProcGroup puts the child in a process group of its own, so that stopping it reaches
// whatever it spawned (npx starts node, uvx starts python), and so that a Ctrl-C meant
// for the router's terminal is not delivered to the children directly.
func setProcGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// signalGroup sends sig to the process group led by p.
func signalGroup(p *os.Process, sig syscall.Signal) error {
	return syscall.Kill(-p.Pid, sig)
}
