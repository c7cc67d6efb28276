package testio

import (
	"io"
	"testing"
)

func TestChunkReader(t *testing.T) {
	r := NewChunkReader([]byte("abcdefg"), 3)
	var reads []string
	buf := make([]byte, 8)
	for {
		n, err := r.Read(buf)
		if err == io.EOF {
			break
		}
		reads = append(reads, string(buf[:n]))
	}
	if len(reads) != 3 || reads[0] != "abc" || reads[2] != "g" {
		t.Errorf("reads %q", reads)
	}
	r.Reset([]byte("xy"), 1)
	if b, _ := io.ReadAll(r); string(b) != "xy" {
		t.Errorf("after Reset: %q", b)
	}
}
