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

func TestInputs(t *testing.T) {
	dir := t.TempDir()
	*update = true
	Check(t, filepath.Join(dir, "b.txt"), []byte("b"))
	Check(t, filepath.Join(dir, "a.txt"), []byte("a"))
	*update = false
	ins := Inputs(t, filepath.Join(dir, "*.txt"))
	if len(ins) != 2 || string(ins[0].Data) != "a" || filepath.Base(ins[1].Path) != "b.txt" {
		t.Errorf("inputs %+v", ins)
	}
	var f fakeTB
	func() {
		defer func() { _ = recover() }()
		Inputs(&f, filepath.Join(dir, "*.none"))
	}()
	if !f.failed {
		t.Error("no input passed")
	}
}
