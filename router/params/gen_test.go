package params

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/mcprouter/mcprouter/internal/testbin"
)

// tables_gen.go is what the generator makes of testdata/*/schema.json today: a schema
// updated without `go generate` fails here.
func TestTablesUpToDate(t *testing.T) {
	testbin.Long(t, "builds and runs the generator")
	out := filepath.Join(t.TempDir(), "tables_gen.go")
	cmd := exec.Command("go", "run", "./internal/gen", "-dir", ".", "-out", out)
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("generator: %v\n%s", err, msg)
	}
	want, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("tables_gen.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Error("tables_gen.go is stale: run go generate ./router/params")
	}
}
