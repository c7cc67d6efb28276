package fanout

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

// A child process holds the servers when one process cannot hold the sockets of both
// ends: with every session's GET stream on its own TCP connection, 10,000 sessions are
// 10,000 client sockets plus 10,000 server sockets, past a common RLIMIT_NOFILE hard
// limit of 20,000 that an unprivileged process cannot raise. RLIMIT_NOFILE is per
// process, so splitting clients and servers halves each side's need.
//
// The protocol is lines of text. The child writes "ready <endpoints JSON>" once its
// servers listen (or "error <reason>"), then answers each command read from its stdin
// with one line, "ok [<payload>]" or "error <reason>":
//
//	stats              ok <ServerStats JSON>
//	cpu                ok <CPU time used by the child, in ns>
//	cpuprofile <path>  starts a CPU profile of the child
//	stopprofile        stops it
//	quit               (or end of input) closes the servers; the child exits
//
// Its stdout carries nothing else; logs go to stderr or nowhere.

// ServeChild runs the servers for a parent process: it is the body of the child's main.
func ServeChild(cfg ServerConfig, in io.Reader, out io.Writer) error {
	srv, err := StartServers(cfg)
	if err != nil {
		fmt.Fprintf(out, "error %s\n", oneLine(err.Error()))
		return err
	}
	defer srv.Close()
	ep, _ := json.Marshal(srv.Endpoints())
	fmt.Fprintf(out, "ready %s\n", ep)
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		cmd, arg, _ := strings.Cut(strings.TrimSpace(sc.Text()), " ")
		var reply string
		switch cmd {
		case "stats":
			st, err := srv.Stats()
			if err != nil {
				reply = "error " + oneLine(err.Error())
				break
			}
			b, _ := json.Marshal(st)
			reply = "ok " + string(b)
		case "cpu":
			reply = "ok " + strconv.FormatInt(int64(processCPU()), 10)
		case "cpuprofile":
			reply = okOrError(srv.StartCPUProfile(arg))
		case "stopprofile":
			reply = okOrError(srv.StopCPUProfile())
		case "quit":
			return srv.Close()
		default:
			reply = "error unknown command " + oneLine(cmd)
		}
		if _, err := fmt.Fprintln(out, reply); err != nil {
			return err
		}
	}
	return srv.Close()
}

func okOrError(err error) string {
	if err != nil {
		return "error " + oneLine(err.Error())
	}
	return "ok"
}

func oneLine(s string) string { return strings.ReplaceAll(s, "\n", " ") }

// Child is a server process started by Spawn. Its methods are safe for concurrent use.
type Child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string // the child's stdout, line by line; closed when it ends
	ep    Endpoints
	exit  chan error // the child's exit status, once

	mu sync.Mutex // one command at a time

	closeOnce sync.Once
	closeErr  error
}

// childTimeout bounds every exchange with the child but the start.
const childTimeout = 30 * time.Second

// Spawn starts argv (a program that calls ServeChild) with env added to this process's
// environment, and waits up to startTimeout for its servers. The child's stderr is this
// process's.
func Spawn(argv []string, env []string, startTimeout time.Duration) (*Child, error) {
	if len(argv) == 0 {
		return nil, errors.New("fanout: Spawn: no program")
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("fanout: start %s: %w", argv[0], err)
	}
	c := &Child{cmd: cmd, stdin: stdin, lines: make(chan string, 4), exit: make(chan error, 1)}
	go func() {
		defer close(c.lines)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		// Wait only after stdout is drained (exec.Cmd's rule for StdoutPipe).
		c.exit <- cmd.Wait()
	}()
	line, err := c.readLine(startTimeout)
	if err == nil {
		payload, ok := strings.CutPrefix(line, "ready ")
		if !ok {
			err = fmt.Errorf("fanout: child: %s", line)
		} else if jerr := json.Unmarshal([]byte(payload), &c.ep); jerr != nil {
			err = fmt.Errorf("fanout: child endpoints: %w", jerr)
		}
	}
	if err != nil {
		c.kill()
		return nil, err
	}
	return c, nil
}

func (c *Child) readLine(timeout time.Duration) (string, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case line, ok := <-c.lines:
		if !ok {
			return "", errors.New("fanout: the child process ended")
		}
		return line, nil
	case <-t.C:
		return "", fmt.Errorf("fanout: no answer from the child process within %v", timeout)
	}
}

// command sends one command and returns the payload of its "ok" answer.
func (c *Child) command(cmd string) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, err := io.WriteString(c.stdin, cmd+"\n"); err != nil {
		return "", err
	}
	line, err := c.readLine(childTimeout)
	if err != nil {
		return "", err
	}
	if rest, ok := strings.CutPrefix(line, "error "); ok {
		return "", fmt.Errorf("fanout: child: %s: %s", cmd, rest)
	}
	if line == "ok" {
		return "", nil
	}
	payload, ok := strings.CutPrefix(line, "ok ")
	if !ok {
		return "", fmt.Errorf("fanout: child: unexpected answer %q", line)
	}
	return payload, nil
}

// Endpoints implements Target.
func (c *Child) Endpoints() Endpoints { return c.ep }

// Stats implements Target.
func (c *Child) Stats() (ServerStats, error) {
	var st ServerStats
	payload, err := c.command("stats")
	if err != nil {
		return st, err
	}
	return st, json.Unmarshal([]byte(payload), &st)
}

// CPU implements Target: the child's CPU time.
func (c *Child) CPU() (time.Duration, error) {
	payload, err := c.command("cpu")
	if err != nil {
		return 0, err
	}
	ns, err := strconv.ParseInt(payload, 10, 64)
	return time.Duration(ns), err
}

// InProcess implements Target.
func (c *Child) InProcess() bool { return false }

// StartCPUProfile implements Target: a CPU profile of the child process.
func (c *Child) StartCPUProfile(path string) error {
	_, err := c.command("cpuprofile " + path)
	return err
}

// StopCPUProfile implements Target.
func (c *Child) StopCPUProfile() error {
	_, err := c.command("stopprofile")
	return err
}

// Close asks the child to stop its servers and waits for it to exit; a child that does
// not exit within the bound is killed. Calls after the first return its result.
func (c *Child) Close() error {
	c.closeOnce.Do(func() { c.closeErr = c.close() })
	return c.closeErr
}

func (c *Child) close() error {
	c.mu.Lock()
	io.WriteString(c.stdin, "quit\n")
	c.stdin.Close()
	c.mu.Unlock()
	// Drain anything it still prints, so that it never blocks on a full pipe.
	go func() {
		for range c.lines {
		}
	}()
	t := time.NewTimer(childTimeout)
	defer t.Stop()
	select {
	case err := <-c.exit:
		return err
	case <-t.C:
		c.kill()
		return fmt.Errorf("fanout: the child process did not exit within %v: killed", childTimeout)
	}
}

// kill ends the child by its PID and reaps it.
func (c *Child) kill() {
	c.stdin.Close()
	c.cmd.Process.Kill()
	go func() {
		for range c.lines {
		}
	}()
	t := time.NewTimer(10 * time.Second)
	defer t.Stop()
	select {
	case <-c.exit:
	case <-t.C:
	}
}
