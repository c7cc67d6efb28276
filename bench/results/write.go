package results

import (
	"errors"
	"os"
)

// WriteSection replaces (or appends) the section under heading in the results file at
// path, creating the file, titled, when it does not exist yet. Each benchmark command
// calls it once with its own heading.
func WriteSection(path, heading, section string) error {
	doc, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if len(doc) == 0 {
		doc = []byte("# Benchmark results\n")
	}
	return os.WriteFile(path, ReplaceSection(doc, heading, section), 0o644)
}
