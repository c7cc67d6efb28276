package scale

import (
	"os"
	"testing"
)

// TestReadSyscalls: this process's counts of /proc/PID/io grow by at least the reads
// and writes it makes in between (other goroutines may add theirs).
func TestReadSyscalls(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "io")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	before, err := readSyscalls(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	const n = 10
	buf := make([]byte, 1)
	for range n {
		if _, err := f.Write(buf); err != nil {
			t.Fatal(err)
		}
		if _, err := f.ReadAt(buf, 0); err != nil {
			t.Fatal(err)
		}
	}
	after, err := readSyscalls(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if d := after.minus(before); d.Reads < n || d.Writes < n {
		t.Errorf("%d reads, %d writes counted over %d of each", d.Reads, d.Writes, n)
	}
	if _, err := readSyscalls(-1); err == nil {
		t.Error("no error for a process that cannot exist")
	}
}
