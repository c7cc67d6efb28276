package loadgen

import (
	"bytes"
	"os"
	"strconv"
	"time"
)

// runqueueWait returns the total time the process's threads have spent runnable but
// waiting for a CPU (the second field of /proc/<pid>/task/<tid>/schedstat), or 0 when
// the kernel does not expose it. Growth of this figure means other processes compete
// for the CPUs: a generator that cannot get a CPU on time cannot send on time either.
func runqueueWait() time.Duration { return RunqueueWait(os.Getpid()) }

// RunqueueWait is runqueueWait for any process pid (a harness watching the processes
// it measures: a router starved of CPU by its neighbours waits here).
func RunqueueWait(pid int) time.Duration {
	dir := "/proc/" + strconv.Itoa(pid) + "/task/"
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	var total int64
	buf := make([]byte, 0, 128)
	for _, t := range tasks {
		f, err := os.Open(dir + t.Name() + "/schedstat")
		if err != nil {
			continue // the thread exited
		}
		buf = buf[:cap(buf)]
		n, _ := f.Read(buf)
		f.Close()
		fields := bytes.Fields(buf[:n])
		if len(fields) < 2 {
			continue
		}
		if v, err := strconv.ParseInt(string(fields[1]), 10, 64); err == nil {
			total += v
		}
	}
	return time.Duration(total)
}
