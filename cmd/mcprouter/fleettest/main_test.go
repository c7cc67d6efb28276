package fleettest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// routerBin and backendBin are the commands built by TestMain.
var routerBin, backendBin string

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "mcprouter-fleettest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "fleettest: temp dir:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	routerBin = filepath.Join(dir, "mcprouter")
	backendBin = filepath.Join(dir, "mcpbackend")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	builds := []struct {
		bin, pkg string
		race     bool
	}{
		// The router under test carries the race detector when the tests do; the
		// backends are the test's fixtures and stay fast.
		{routerBin, "..", raceEnabled},
		{backendBin, "../../mcpbackend", false},
	}
	for _, b := range builds {
		args := []string{"build", "-o", b.bin}
		if b.race {
			args = append(args, "-race")
		}
		build := exec.CommandContext(ctx, "go", append(args, b.pkg)...)
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "fleettest: go build", b.pkg+":", err)
			return 1
		}
	}
	return m.Run()
}

// wait bounds every single client operation and every condition the tests wait for,
// unless a test says otherwise.
const wait = 20 * time.Second

// logBuffer keeps the last lines a process wrote, for failure messages; safe for
// concurrent use.
type logBuffer struct {
	mu    sync.Mutex
	lines []string
}

const maxLogLines = 400

func (b *logBuffer) add(line string) {
	b.mu.Lock()
	b.lines = append(b.lines, line)
	if len(b.lines) > maxLogLines {
		b.lines = b.lines[len(b.lines)-maxLogLines:]
	}
	b.mu.Unlock()
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Join(b.lines, "\n")
}

// count returns how many kept lines contain s.
func (b *logBuffer) count(s string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, l := range b.lines {
		if strings.Contains(l, s) {
			n++
		}
	}
	return n
}

// proc is one process a test started.
type proc struct {
	name   string
	args   []string
	cmd    *exec.Cmd
	log    *logBuffer
	exited chan struct{}
	err    error // Wait's result, set before exited closes
	// raced is set when the process printed a race detector report.
	raced bool

	// Addresses read from the process's "listening" log lines.
	addr, admin string
}

// startProc starts bin and waits until it logged, for each of ready, a line containing
// it with an addr= value: the first address is kept as the process's addr, a second
// one (the router's "admin listening") as admin. The process is killed (by its PID) at
// cleanup if it still runs.
func startProc(t *testing.T, name, bin string, ready []string, args ...string) *proc {
	t.Helper()
	p, err := spawn(name, bin, ready, args...)
	if p != nil {
		t.Cleanup(func() { p.kill() })
	}
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// spawn starts bin and waits for its ready lines (see startProc). On error the process,
// if it was started, has been killed; the caller must arrange to kill a returned one.
func spawn(name, bin string, ready []string, args ...string) (*proc, error) {
	cmd := exec.Command(bin, args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, args: args, cmd: cmd, log: new(logBuffer), exited: make(chan struct{})}
	addrs := make([]string, len(ready))
	readyCh := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		missing, raced := len(ready), false
		for sc.Scan() {
			line := sc.Text()
			p.log.add(line)
			if strings.Contains(line, "WARNING: DATA RACE") {
				raced = true
			}
			for i, r := range ready {
				if addrs[i] == "" && missing > 0 && strings.Contains(line, r) {
					if addrs[i] = logValue(line, "addr"); addrs[i] != "" {
						if missing--; missing == 0 {
							close(readyCh)
						}
					}
				}
			}
		}
		io.Copy(io.Discard, stderr)
		p.err = cmd.Wait()
		p.raced = raced
		close(p.exited)
	}()
	select {
	case <-readyCh:
		p.addr = addrs[0]
		if len(addrs) > 1 {
			p.admin = addrs[1]
		}
		return p, nil
	case <-p.exited:
		return p, fmt.Errorf("%s exited before listening: %v\n%s", name, p.err, p.log)
	case <-time.After(wait):
		p.kill()
		return p, fmt.Errorf("%s did not log %q within %v\n%s", name, ready, wait, p.log)
	}
}

// kill ends the process at once (SIGKILL to its PID) and waits for it.
func (p *proc) kill() {
	select {
	case <-p.exited:
		return
	default:
	}
	p.cmd.Process.Kill()
	select {
	case <-p.exited:
	case <-time.After(wait):
	}
}

// stop ends the process gracefully (SIGTERM), then kills it if it lingers; it reports
// whether it stopped on its own.
func (p *proc) stop() bool {
	select {
	case <-p.exited:
		return true
	default:
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		return true
	case <-time.After(wait):
		p.kill()
		return false
	}
}

// logValue extracts key=value from a slog text line.
func logValue(line, key string) string {
	i := strings.Index(line, " "+key+"=")
	if i < 0 {
		return ""
	}
	v := line[i+len(key)+2:]
	if j := strings.IndexByte(v, ' '); j >= 0 {
		v = v[:j]
	}
	return strings.Trim(v, `"`)
}

// waitFor polls cond until it holds or d passes; it returns whether it held.
func waitFor(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(25 * time.Millisecond)
	}
}
