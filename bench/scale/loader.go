package scale

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mcprouter/mcprouter/internal/ctxtime"
	"github.com/mcprouter/mcprouter/loadgen/client"
)

// loader is one `mcpload hold` process, driven over its standard input and output
// (the protocol is in cmd/mcpload/hold.go).
type loader struct {
	name     string
	sessions int
	cmd      *exec.Cmd
	in       io.WriteCloser
	lines    chan string // its output lines; closed when it ends
	done     chan struct{}
	opened   client.HoldOpened
	held     atomic.Int64 // sessions held, from its progress lines
}

// startLoader starts a loader of n sessions over urls (session i on urls[i mod len]);
// its diagnostics go to logPath.
func startLoader(name, bin, logPath string, n int, urls []string, c *Config) (*loader, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	args := []string{"hold", "--url", strings.Join(urls, ","), "--sessions", fmt.Sprint(n),
		"--protocol", c.Protocol, "--uri", "memo://board", "--source-addrs", c.SourceAddrs,
		"--concurrency", fmt.Sprint(c.Concurrency)}
	if c.Profiles {
		base := strings.TrimSuffix(logPath, ".log")
		args = append(args, "--cpuprofile", base+".cpu.pprof", "--memprofile", base+".heap.pprof")
	}
	cmd := exec.Command(bin, args...)
	cmd.SysProcAttr = childAttr()
	cmd.Stderr = logf
	l := &loader{name: name, sessions: n, cmd: cmd, lines: make(chan string, 4), done: make(chan struct{})}
	if l.in, err = cmd.StdinPipe(); err != nil {
		logf.Close()
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		logf.Close()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for sc.Scan() {
			l.lines <- sc.Text()
		}
		close(l.lines)
	}()
	go func() {
		cmd.Wait()
		logf.Close()
		close(l.done)
	}()
	return l, nil
}

func (l *loader) pid() int { return l.cmd.Process.Pid }

// expect reads the loader's next line, which must start with word, within wait, and
// decodes its JSON payload into v (when not nil). Progress lines on the way are
// noted (l.held) and restart the wait: a loader that keeps opening sessions is not
// given up on.
func (l *loader) expect(word string, v any, wait time.Duration) error {
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		var line string
		var ok bool
		select {
		case line, ok = <-l.lines:
		case <-t.C:
			return fmt.Errorf("%s: no %q within %v", l.name, word, wait)
		}
		if !ok {
			return fmt.Errorf("%s ended (see its log)", l.name)
		}
		got, payload, _ := strings.Cut(line, " ")
		if got == "progress" {
			var held, failed int
			if _, err := fmt.Sscan(payload, &held, &failed); err == nil && held > int(l.held.Load()) {
				l.held.Store(int64(held))
				t.Reset(wait)
			}
			continue
		}
		if got != word {
			return fmt.Errorf("%s: %q, want %s", l.name, line, word)
		}
		if v != nil {
			if err := json.Unmarshal([]byte(payload), v); err != nil {
				return fmt.Errorf("%s: %q: %v", l.name, line, err)
			}
		}
		return nil
	}
}

// send writes one command line.
func (l *loader) send(format string, args ...any) error {
	_, err := fmt.Fprintf(l.in, format+"\n", args...)
	return err
}

// stop ends the loader: quit, then SIGKILL if it has not exited within a few seconds.
// Its exit closes its connections at once (the routers see them go).
func (l *loader) stop() {
	l.send("quit")
	l.in.Close()
	if !ctxtime.Wait(l.done, 5*time.Second) {
		_ = l.cmd.Process.Signal(syscall.SIGKILL)
		<-l.done
	}
}

var errStopped = errors.New("interrupted")
