//go:build unix

package readahead

import (
	"testing"
	"unsafe"
)

// TestConnSize: a connection's wrapper and its raw reader stay within the 144- and
// 160-byte size classes on 64-bit platforms, and within 288 bytes together (connFD):
// every connection of the router has both, an idle one too (with time.Time deadlines
// and wider counts they took 240 and 208, apart).
func TestConnSize(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("sizes are counted for 64-bit platforms")
	}
	if n := unsafe.Sizeof(conn{}); n > 144 {
		t.Errorf("conn is %d bytes, more than the 144-byte size class", n)
	}
	if n := unsafe.Sizeof(fdIO{}); n > 160 {
		t.Errorf("fdIO is %d bytes, more than the 160-byte size class", n)
	}
	if n := unsafe.Sizeof(connFD{}); n > 288 {
		t.Errorf("connFD is %d bytes, more than the 288-byte size class", n)
	}
}
