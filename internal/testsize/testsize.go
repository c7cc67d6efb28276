// Package testsize checks that the structs a process keeps for every session, stream
// or connection stay within the size class they were fitted to: a struct that grows
// past its class costs the next class's bytes on each of them. Only tests import it.
package testsize

import (
	"fmt"
	"testing"
	"unsafe"
)

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
