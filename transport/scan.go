//go:build !transport_scancount

package transport

import "github.com/mcprouter/mcprouter/codec"

// scanElement is the one place the inbound path scans a message (see inbound.scan); the
// transport_scancount build counts its calls to prove that each message is scanned once.
func scanElement(b []byte, m *codec.Message) error { return codec.Scan(b, m) }
