//go:build linux

package compare

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// childAttr makes the kernel kill a child when the harness dies (an interrupted run must
// not leave servers behind on the machine). The signal follows the thread that forked the
// child; Go keeps its threads for the life of the process unless a locked goroutine
// exits, which the harness never does.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// userHZ is the unit of utime and stime in /proc/<pid>/stat (USER_HZ, 100 on every Linux
// architecture Go supports).
const userHZ = 100

// procCPU returns the CPU time (user + system, all threads) process pid has used, with
// the CPU of the children it has reaped and of every descendant still running: a proxy
// that runs its backend as a child process (a stdio bridge, the router in front of a stdio
// server) or hands the work to worker processes (nginx) is charged for all of it.
func procCPU(pid int) (time.Duration, error) {
	own, _, err := readStat(pid)
	if err != nil {
		return 0, err
	}
	children, ticks := procTable()
	total := own
	for _, d := range walk(children, pid) {
		total += ticks[d] // read once, by procTable
	}
	return total * time.Second / userHZ, nil
}

// ProcCPU is procCPU for the other harnesses that charge a process its CPU (the soak's
// router CPU per call).
func ProcCPU(pid int) (time.Duration, error) { return procCPU(pid) }

// readStat returns, from /proc/<pid>/stat, utime+stime+cutime+cstime (in USER_HZ ticks)
// and the parent's id.
func readStat(pid int) (ticks time.Duration, ppid int, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, err
	}
	return parseStat(b)
}

// parseStat reads one /proc/<pid>/stat line. The command name (field 2) is in
// parentheses and may contain spaces: fields are counted after the last ')'.
func parseStat(b []byte) (ticks time.Duration, ppid int, err error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, errors.New("/proc stat: unexpected format")
	}
	f := bytes.Fields(b[i+1:])
	// After ')': state(3) ppid(4) ... utime(14) stime(15) cutime(16) cstime(17), so
	// indexes 1 and 11 to 14.
	if len(f) < 15 {
		return 0, 0, errors.New("/proc stat: unexpected format")
	}
	ppid, err = strconv.Atoi(string(f[1]))
	if err != nil {
		return 0, 0, errors.New("/proc stat: unexpected format")
	}
	for _, v := range f[11:15] {
		n, err := strconv.ParseInt(string(v), 10, 64)
		if err != nil {
			return 0, 0, errors.New("/proc stat: unexpected format")
		}
		ticks += time.Duration(n)
	}
	return ticks, ppid, nil
}

// descendants lists the running descendants of pid (children, their children, ...).
func descendants(pid int) []int {
	children, _ := procTable()
	return walk(children, pid)
}

// procTable reads every running process's stat once: the children of each pid, and each
// process's CPU ticks (as readStat). A process that exits meanwhile is left out.
func procTable() (children map[int][]int, ticks map[int]time.Duration) {
	children, ticks = map[int][]int{}, map[int]time.Duration{}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return children, ticks
	}
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if t, pp, err := readStat(p); err == nil {
			children[pp] = append(children[pp], p)
			ticks[p] = t
		}
	}
	return children, ticks
}

// walk lists the descendants of pid in children, breadth first.
func walk(children map[int][]int, pid int) []int {
	var out []int
	queue := children[pid]
	for len(queue) > 0 && len(out) < maxDescendants {
		p := queue[0]
		queue = queue[1:]
		out = append(out, p)
		queue = append(queue, children[p]...)
	}
	return out
}

// maxDescendants bounds the walk (a pid table read while processes come and go must not
// loop).
const maxDescendants = 4096

// cpuTimes returns the busy and total time of the given CPUs so far, from /proc/stat.
// Busy is user, nice, system, irq and steal time; total adds idle, iowait and softirq.
// Softirq time is left out of busy because most of it is the kernel processing our own
// loopback packets, which is charged to no process: counted as busy, it would show up as
// load from "other processes" that is in fact the run's own traffic.
func cpuTimes(cpus []int) (busy, total time.Duration, err error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, err
	}
	want := map[string]bool{}
	for _, c := range cpus {
		want["cpu"+strconv.Itoa(c)] = true
	}
	found := 0
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 9 || !want[f[0]] {
			continue
		}
		var v [8]int64
		for i := range v {
			if v[i], err = strconv.ParseInt(f[i+1], 10, 64); err != nil {
				return 0, 0, fmt.Errorf("/proc/stat: %q: %v", line, err)
			}
		}
		// user nice system idle iowait irq softirq steal
		bz := v[0] + v[1] + v[2] + v[5] + v[7]
		busy += time.Duration(bz) * time.Second / userHZ
		total += time.Duration(bz+v[3]+v[4]+v[6]) * time.Second / userHZ
		found++
	}
	if found != len(cpus) {
		return 0, 0, fmt.Errorf("/proc/stat: found %d of the CPUs %v", found, cpus)
	}
	return busy, total, nil
}

// allowedCPUs lists the CPUs this process may run on (its affinity), in order.
func allowedCPUs() []int {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return nil
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
			return parseCPUList(strings.TrimSpace(v))
		}
	}
	return nil
}

// cpuModel is the first "model name" of /proc/cpuinfo.
func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

// loadAverage is the first three fields of /proc/loadavg.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// kernelRelease is the running kernel's version.
func kernelRelease() string {
	b, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return ""
	}
	return "Linux " + strings.TrimSpace(string(b))
}
