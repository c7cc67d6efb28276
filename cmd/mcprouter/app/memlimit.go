package app

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// cgroupShare is the part of a cgroup memory limit given to the Go heap's soft limit:
// the rest is for stacks, the runtime itself and what is not Go memory, so that the
// garbage collector works harder before the kernel's OOM killer steps in.
const cgroupShare = 0.9

// ApplyMemoryLimit sets the Go runtime's soft memory limit for the process (call it
// once, from main): a GOMEMLIMIT environment variable wins (the runtime has applied
// it); then memory_limit; then 90% of the cgroup's memory limit, when there is one.
func ApplyMemoryLimit(cfg Config, log *slog.Logger) error {
	limit, source, err := memoryLimit(cfg.MemoryLimit, os.Getenv("GOMEMLIMIT"), os.DirFS("/"))
	if err != nil {
		return err
	}
	if limit > 0 {
		debug.SetMemoryLimit(limit)
	}
	if source != "" {
		log.Info("memory limit", "bytes", debug.SetMemoryLimit(-1), "from", source)
	}
	return nil
}

// memoryLimit chooses the limit to set (0: leave the runtime's) and says where it comes
// from; root is the file system the cgroup files are read from.
func memoryLimit(configured, env string, root fs.FS) (int64, string, error) {
	if env != "" {
		return 0, "GOMEMLIMIT", nil
	}
	n, err := parseBytes(configured)
	if err != nil {
		return 0, "", fmt.Errorf("memory_limit: %w", err)
	}
	if n > 0 {
		return n, "memory_limit", nil
	}
	if cg, ok := cgroupMemoryLimit(root); ok {
		return int64(float64(cg) * cgroupShare), "cgroup", nil
	}
	return 0, "", nil
}

// cgroupMemoryLimit reads the memory limit of the process's cgroup: cgroup v2
// (memory.max at the root of the cgroup namespace), else v1 (memory.limit_in_bytes).
// "max", v1's huge "unlimited" values and unreadable files mean no limit.
func cgroupMemoryLimit(root fs.FS) (int64, bool) {
	for _, name := range []string{"sys/fs/cgroup/memory.max", "sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		b, err := fs.ReadFile(root, name)
		if err != nil {
			continue
		}
		v := strings.TrimSpace(string(b))
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 || n >= 1<<60 {
			return 0, false // "max", unlimited, or not a number
		}
		return n, true
	}
	return 0, false
}

// byteUnits are the units a size may carry.
var byteUnits = []struct {
	suffix string
	mult   int64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"B", 1},
}

// parseBytes reads a size: a number of bytes, with an optional unit (KiB, MiB, GiB,
// TiB, KB, MB, GB, TB, B). "" is 0.
func parseBytes(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, nil
	}
	mult := int64(1)
	for _, u := range byteUnits {
		if num, ok := strings.CutSuffix(s, u.suffix); ok {
			s, mult = strings.TrimSpace(num), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, errors.New("want a number of bytes, with an optional unit such as MiB or GiB")
	}
	if n > (1<<63-1)/mult {
		return 0, errors.New("too large")
	}
	return n * mult, nil
}
