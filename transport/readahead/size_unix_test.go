//go:build unix

package readahead

import (
	"testing"
	"unsafe"

	"github.com/mcprouter/mcprouter/internal/testsize"
)

// TestConnSize: a connection's wrapper and its raw reader stay within the 144- and
// 160-byte size classes on 64-bit platforms, and within 288 bytes together (connFD):
// every connection of the router has both, an idle one too (with time.Time deadlines
// and wider counts they took 240 and 208, apart).
func TestConnSize(t *testing.T) {
	testsize.Within(t,
		testsize.Max{Name: "conn", Size: unsafe.Sizeof(conn{}), Max: 144},
		testsize.Max{Name: "fdIO", Size: unsafe.Sizeof(fdIO{}), Max: 160},
		testsize.Max{Name: "connFD", Size: unsafe.Sizeof(connFD{}), Max: 288})
}
