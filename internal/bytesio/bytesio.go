// Package bytesio reads a body into a caller's buffer with a size limit, without
// allocating beyond the buffer's growth: the upstream client reads backend replies with
// it on the forwarding path, and the load generator reads server replies. Any goroutine
// may call it.
package bytesio

import "io"

// AppendAtMost appends everything r yields to dst and returns it. Past limit bytes it
// stops and returns tooLarge (the caller's own sentinel) with what it has read; a
// read error other than io.EOF is returned as is.
func AppendAtMost(dst []byte, r io.Reader, limit int, tooLarge error) ([]byte, error) {
	for {
		if len(dst) == cap(dst) {
			dst = append(dst, 0)[:len(dst)]
		}
		n, err := r.Read(dst[len(dst):cap(dst)])
		dst = dst[:len(dst)+n]
		if len(dst) > limit {
			return dst, tooLarge
		}
		if err == io.EOF {
			return dst, nil
		}
		if err != nil {
			return dst, err
		}
	}
}
