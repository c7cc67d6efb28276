package scale

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// childAttr makes a child die with the command, whatever ends it.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// readSyscalls reads a process's system calls of the read and write families so far
// (syscr and syscw of /proc/PID/io; a read that finds nothing counts).
func readSyscalls(pid int) (sysc, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		return sysc{}, err
	}
	var s sysc
	for line := range strings.Lines(string(b)) {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ": ")
		n, _ := strconv.ParseInt(v, 10, 64)
		switch k {
		case "syscr":
			s.Reads = n
		case "syscw":
			s.Writes = n
		}
	}
	return s, nil
}
