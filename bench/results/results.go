// Package results edits bench/RESULTS.md: each benchmark command owns one "## " section
// and replaces it, leaving the others byte for byte.
package results

import (
	"bytes"
	"strings"
)

// ReplaceSection returns doc with the section that starts at the line equal to heading
// (through the line before the next "## " heading, or the end) replaced by section. A
// missing section is appended. Everything else is kept byte for byte. Lines inside code
// fences are not headings; if the document's fences are unbalanced and hide the heading,
// it is looked for again ignoring fences, so that replacing twice changes nothing.
func ReplaceSection(doc []byte, heading, section string) []byte {
	section = strings.TrimRight(section, "\n") + "\n"
	lines := bytes.SplitAfter(doc, []byte("\n"))
	start, end := findSection(lines, heading, true)
	if start < 0 {
		start, end = findSection(lines, heading, false)
	}
	var out bytes.Buffer
	if start < 0 {
		out.Write(doc)
		if len(doc) > 0 {
			if !bytes.HasSuffix(doc, []byte("\n")) {
				out.WriteByte('\n')
			}
			if !bytes.HasSuffix(doc, []byte("\n\n")) {
				out.WriteByte('\n')
			}
		}
		out.WriteString(section)
		return out.Bytes()
	}
	for _, l := range lines[:start] {
		out.Write(l)
	}
	out.WriteString(section)
	if end < len(lines) {
		out.WriteByte('\n')
		for _, l := range lines[end:] {
			out.Write(l)
		}
	}
	return out.Bytes()
}

// findSection returns the index of the heading line and of the next "## " line (or
// len(lines)); start is -1 when the heading is absent.
func findSection(lines [][]byte, heading string, fences bool) (start, end int) {
	start, end = -1, len(lines)
	inFence := false
	for i, l := range lines {
		t := bytes.TrimRight(l, "\r\n")
		if fences && bytes.HasPrefix(t, []byte("```")) {
			inFence = !inFence
			continue
		}
		if inFence {
			continue // a "## " inside a code block is not a heading
		}
		if start < 0 {
			if string(t) == heading {
				start = i
			}
			continue
		}
		if bytes.HasPrefix(t, []byte("## ")) {
			return start, i
		}
	}
	return start, end
}
