package testio

import (
	"io"
	"sync"
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

func TestBuffer(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				b.Write([]byte("ab"))
				_ = b.String()
			}
		}()
	}
	wg.Wait()
	if n := len(b.String()); n != 800 {
		t.Errorf("kept %d bytes, want 800", n)
	}

	bounded := Buffer{Max: 5}
	for _, s := range []string{"abc", "de", "f"} {
		if n, err := bounded.Write([]byte(s)); n != len(s) || err != nil {
			t.Errorf("Write(%q) = %d, %v", s, n, err)
		}
	}
	if got := bounded.String(); got != "abcde" {
		t.Errorf("bounded buffer kept %q, want the first 5 bytes", got)
	}
}
