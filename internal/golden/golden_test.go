package golden

import (
	"path/filepath"
	"testing"
)

// Check passes on the file's own content; with -update (set here by hand) it writes a
// missing file, folders included, which Check then accepts.
func TestCheck(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a", "b.golden")
	*update = true
	Check(t, path, []byte("one\n"))
	*update = false
	Check(t, path, []byte("one\n"))
}

// A difference fails the test (seen through a fake testing.TB).
func TestCheckDiffers(t *testing.T) {
	path := filepath.Join(t.TempDir(), "b.golden")
	*update = true
	Check(t, path, []byte("one\n"))
	*update = false
	var f fakeTB
	Check(&f, path, []byte("two\n"))
	if !f.failed {
		t.Error("a difference passed")
	}
}

type fakeTB struct {
	testing.TB
	failed bool
}

func (f *fakeTB) Helper()               {}
func (f *fakeTB) Errorf(string, ...any) { f.failed = true }
func (f *fakeTB) Fatalf(string, ...any) { f.failed = true }
