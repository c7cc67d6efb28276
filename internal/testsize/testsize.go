// Package testsize checks that the structs a process keeps for every session, stream
// or connection stay within the size class they were fitted to: a struct that grows
// past its class costs the next class's bytes on each of them; and it reads the live
// heap, for the tests and benchmarks that count what many of them hold together. Only
// tests import it.
package testsize

import (
	"fmt"
	"runtime"
	"testing"
	"unsafe"
)

// LiveHeap is the bytes of live objects: HeapAlloc (not rounded to spans, as HeapInuse
// is) after two collections, the second for what the first's finalizers let go.
func LiveHeap() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// Max is a struct's size (unsafe.Sizeof) and the most it may take.
type Max struct {
	Name      string
	Size, Max uintptr
}

// Within fails t for every struct of objs larger than its Max (Over). On a platform
// whose pointers are not 8 bytes it skips t: the classes are counted for 64-bit
// platforms.
func Within(t testing.TB, objs ...Max) {
	t.Helper()
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("sizes are counted for 64-bit platforms")
	}
	for _, msg := range Over(objs...) {
		t.Error(msg)
	}
}

// Over says which structs of objs are larger than their Max, one message each.
func Over(objs ...Max) []string {
	var over []string
	for _, o := range objs {
		if o.Size > o.Max {
			over = append(over, fmt.Sprintf("%s is %d bytes, more than the %d-byte size class", o.Name, o.Size, o.Max))
		}
	}
	return over
}
