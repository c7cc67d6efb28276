package results

import (
	"os"
	"path/filepath"
	"testing"
)

// TestWriteSection creates a missing file with its title, then replaces its own section
// on a second write while leaving another command's section alone.
func TestWriteSection(t *testing.T) {
	path := filepath.Join(t.TempDir(), "RESULTS.md")
	if err := WriteSection(path, "## a", "## a\n\none\n"); err != nil {
		t.Fatal(err)
	}
	if err := WriteSection(path, "## b", "## b\n\nbee\n"); err != nil {
		t.Fatal(err)
	}
	if err := WriteSection(path, "## a", "## a\n\ntwo\n"); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := "# Benchmark results\n\n## a\n\ntwo\n\n## b\n\nbee\n"
	if string(got) != want {
		t.Fatalf("file is\n%q\nwant\n%q", got, want)
	}
}
