//go:build transport_scancount

package transport

import (
	"sync/atomic"

	"github.com/mcprouter/mcprouter/codec"
)

// scans counts the inbound path's scans in the transport_scancount build, for the test
// that each message is scanned exactly once (TestScannedOnce).
var scans atomic.Int64

func scanElement(b []byte, m *codec.Message) error {
	scans.Add(1)
	return codec.Scan(b, m)
}
