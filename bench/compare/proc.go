package compare

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"
)

// stopTimeout bounds how long a process gets to exit after SIGTERM before it is killed.
const stopTimeout = 10 * time.Second

// proc is one child process started by the harness: a server or a load generator run.
// Its standard output and error go to a log file, and are watched line by line for the
// patterns that announce its addresses (the servers print them once they listen, so that
// they can bind port 0 and no free-port guess can race with another process).
type proc struct {
	name string
	argv []string // as started (after the taskset prefix, if any)
	cmd  *exec.Cmd
	out  *lineWatcher
	done chan struct{} // closed once Wait returned
	err  error         // Wait's error; read after done
}

// startProc starts argv (pinned to cpus with taskset when cpus is not empty, with env
// added to the environment), logging to logPath and watching its output for patterns;
// each pattern's first submatch is delivered by waitMatches.
func startProc(name, dir, logPath, cpus string, env, argv []string, patterns ...*regexp.Regexp) (*proc, error) {
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	full := argv
	if cpus != "" {
		full = append([]string{"taskset", "-c", cpus}, argv...)
	}
	cmd := exec.Command(full[0], full[1:]...)
	cmd.Dir = dir
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	w := newLineWatcher(f, patterns)
	cmd.Stdout, cmd.Stderr = w, w // the same comparable writer: exec serialises the writes
	cmd.SysProcAttr = childAttr()
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	p := &proc{name: name, argv: argv, cmd: cmd, out: w, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		w.closeFile()
		close(p.done)
	}()
	return p, nil
}

// pid is the process id (taskset execs the program, so it is the program's id too).
func (p *proc) pid() int { return p.cmd.Process.Pid }

// waitMatches waits until every pattern matched and returns their first submatches in
// order; it fails when the process exits first or the timeout passes.
func (p *proc) waitMatches(timeout time.Duration) ([]string, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-p.out.matched:
		return p.out.results(), nil
	case <-p.done:
		// Output may have matched just before the exit.
		select {
		case <-p.out.matched:
			return p.out.results(), nil
		default:
		}
		return nil, fmt.Errorf("%s exited before it was ready (%v); see %s", p.name, p.err, p.out.path())
	case <-t.C:
		return nil, fmt.Errorf("%s: not ready after %v; see %s", p.name, timeout, p.out.path())
	}
}

// wait waits for the process to exit on its own, at most timeout (then it is stopped).
func (p *proc) wait(ctx context.Context, timeout time.Duration) error {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-p.done:
		return p.err
	case <-ctx.Done():
		p.stop()
		return ctx.Err()
	case <-t.C:
		p.stop()
		return fmt.Errorf("%s did not finish within %v", p.name, timeout)
	}
}

// stop sends SIGTERM, waits up to stopTimeout, then kills. Only this process (by its id)
// is signalled. It returns once the process has exited.
func (p *proc) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(stopTimeout)
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
		_ = p.cmd.Process.Kill()
		<-p.done // Kill cannot be ignored; Wait returns promptly
	}
}

// cpuUsed is the CPU time (user + system) the process used; valid once it has exited.
func (p *proc) cpuUsed() (time.Duration, bool) {
	select {
	case <-p.done:
	default:
		return 0, false
	}
	st := p.cmd.ProcessState
	if st == nil {
		return 0, false
	}
	return st.UserTime() + st.SystemTime(), true
}

// exitedEarly reports whether the process already exited (a server must not).
func (p *proc) exitedEarly() error {
	select {
	case <-p.done:
		return fmt.Errorf("%s exited during the run (%v); see %s", p.name, p.err, p.out.path())
	default:
		return nil
	}
}

// maxLine bounds the partial line kept while watching output: lines longer than this are
// cut (they are still written to the log whole).
const maxLine = 64 << 10

// lineWatcher writes a child's output to its log file and matches complete lines against
// a list of patterns, each until its first match. matched is closed once all matched.
type lineWatcher struct {
	mu       sync.Mutex
	f        *os.File
	partial  []byte
	patterns []*regexp.Regexp
	found    []string
	have     []bool
	left     int
	matched  chan struct{}
}

func newLineWatcher(f *os.File, patterns []*regexp.Regexp) *lineWatcher {
	w := &lineWatcher{f: f, patterns: patterns, found: make([]string, len(patterns)),
		have: make([]bool, len(patterns)), left: len(patterns), matched: make(chan struct{})}
	if w.left == 0 {
		close(w.matched)
	}
	return w
}

func (w *lineWatcher) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, err := w.f.Write(b); err != nil {
		return 0, err
	}
	if w.left == 0 {
		return len(b), nil
	}
	rest := b
	for len(rest) > 0 {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			if room := maxLine - len(w.partial); room > 0 {
				w.partial = append(w.partial, rest[:min(room, len(rest))]...)
			}
			break
		}
		line := rest[:i]
		if len(w.partial) > 0 {
			if room := maxLine - len(w.partial); room > 0 {
				w.partial = append(w.partial, line[:min(room, len(line))]...)
			}
			line = w.partial
		}
		w.match(line)
		w.partial = w.partial[:0]
		rest = rest[i+1:]
	}
	return len(b), nil
}

// match records the first submatch of every pattern not matched yet (w.mu held).
func (w *lineWatcher) match(line []byte) {
	for i, re := range w.patterns {
		if w.have[i] {
			continue
		}
		if m := re.FindSubmatch(line); m != nil {
			if len(m) > 1 {
				w.found[i] = string(m[1])
			} else {
				w.found[i] = string(m[0])
			}
			w.have[i] = true
			w.left--
			if w.left == 0 {
				close(w.matched)
			}
		}
	}
}

func (w *lineWatcher) results() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.found...)
}

// path is the log file's name (valid after the file is closed too).
func (w *lineWatcher) path() string { return w.f.Name() }

func (w *lineWatcher) closeFile() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.f.Close()
}

// runCommand runs argv in dir to completion (bounded by ctx) and returns its combined
// output; a failure carries the tail of that output.
func runCommand(ctx context.Context, dir string, env []string, argv ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = dir
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.SysProcAttr = childAttr()
	cmd.WaitDelay = stopTimeout
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err != nil {
		return out.Bytes(), fmt.Errorf("%s: %w\n%s", strings.Join(argv, " "), err, tail(out.Bytes(), 2000))
	}
	return out.Bytes(), nil
}

// tail returns at most the last n bytes of b.
func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// copyFile copies src to dst (replacing dst).
func copyFile(dst, src string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// errNoProc is returned by the process-CPU reader where /proc does not exist.
var errNoProc = errors.New("per-process CPU time is only read on Linux")
