//go:build linux

package compare

import (
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/internal/testwait"
)

func TestParseStat(t *testing.T) {
	// A command name with spaces and parentheses; utime 100, stime 20, cutime 3, cstime 4.
	line := "4242 (a (b) c) S 17 4242 4242 0 -1 4194304 100 0 0 0 100 20 3 4 20 0 5 0 1 1 1\n"
	ticks, ppid, err := parseStat([]byte(line))
	if err != nil || ticks != 127 || ppid != 17 {
		t.Errorf("parseStat: %v %v %v, want 127 ticks, ppid 17", ticks, ppid, err)
	}
	for _, bad := range []string{"", "1 (x) S", "1 (x) S notanumber 1 1 0 -1 0 0 0 0 0 1 2 3 4"} {
		if _, _, err := parseStat([]byte(bad)); err == nil {
			t.Errorf("parseStat(%q): no error", bad)
		}
	}
}

// TestProcCPUCountsChildren: a process's CPU includes its running children, so that a
// proxy whose backend is its child is charged for both.
func TestProcCPUCountsChildren(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	// sh starts a child sleep and waits for it: the sleep is a descendant.
	cmd := exec.Command(sh, "-c", "sleep 60 & wait")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, d := range descendants(cmd.Process.Pid) {
			if p, err := os.FindProcess(d); err == nil {
				_ = p.Kill()
			}
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	testwait.For(t, "the child to appear", 10*time.Second, func() bool { return len(descendants(cmd.Process.Pid)) > 0 })
	if slices.Contains(descendants(cmd.Process.Pid), cmd.Process.Pid) {
		t.Error("a process is not its own descendant")
	}
	if _, err := procCPU(cmd.Process.Pid); err != nil {
		t.Error(err)
	}
	if _, err := procCPU(-1); err == nil {
		t.Error("procCPU of no process: no error")
	}
}
