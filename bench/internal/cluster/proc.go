package cluster

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// stopWait bounds a graceful stop (SIGTERM) before the process is killed.
const stopWait = 10 * time.Second

// Proc is one child process: its output goes to a log file; it is ready once it
// wrote a line containing its ready text.
type Proc struct {
	Name string
	Argv []string
	Addr string // the addr= value of the ready line, if any

	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// StartProc starts argv, logging to logPath (appended: a restarted process keeps its
// history), and waits up to wait for a line containing ready on its output.
func StartProc(name, logPath, ready string, wait time.Duration, argv ...string) (*Proc, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.SysProcAttr = childAttr()
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = f, pw
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	p := &Proc{Name: name, Argv: argv, cmd: cmd, done: make(chan struct{})}
	readyCh := make(chan string, 1)
	var once sync.Once
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(f, line)
			if strings.Contains(line, ready) {
				once.Do(func() { readyCh <- addrOf(line) })
			}
		}
		io.Copy(io.Discard, pr)
	}()
	go func() {
		p.err = cmd.Wait()
		pw.Close()
		f.Close()
		close(p.done)
	}()
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case p.Addr = <-readyCh:
		return p, nil
	case <-p.done:
		return nil, fmt.Errorf("%s exited before it was ready (%v); see %s", name, p.err, logPath)
	case <-t.C:
		p.Kill()
		return nil, fmt.Errorf("%s not ready within %v; see %s", name, wait, logPath)
	}
}

// addrOf returns the addr= value of a log line ("" without one).
func addrOf(line string) string {
	_, rest, ok := strings.Cut(line, "addr=")
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(rest, " ")
	return strings.Trim(v, `"`)
}

// PID is the process id.
func (p *Proc) PID() int { return p.cmd.Process.Pid }

// Exited reports whether the process has ended.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Signal sends sig to this process (by its PID) if it still runs.
func (p *Proc) Signal(sig syscall.Signal) {
	if !p.Exited() {
		_ = p.cmd.Process.Signal(sig)
	}
}

// Kill sends SIGKILL and waits for the exit.
func (p *Proc) Kill() {
	p.Signal(syscall.SIGKILL)
	<-p.done
}

// Stop sends SIGTERM (and SIGCONT, in case it is paused), waits up to stopWait, then
// kills.
func (p *Proc) Stop() {
	p.Signal(syscall.SIGTERM)
	p.Signal(syscall.SIGCONT)
	t := time.NewTimer(stopWait)
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
		p.Kill()
	}
}
