package codec

// ParseUintID reads a JSON-RPC id token written as a plain decimal integer of at most 19
// digits (no sign, fraction, exponent, quotes or leading zero), without allocating: the
// form in which a client or router that numbers its requests writes them, so that a
// reply's id maps back to the number exactly (strconv gives the same bytes back).
func ParseUintID(id []byte) (uint64, bool) {
	if len(id) == 0 || len(id) > 19 || len(id) > 1 && id[0] == '0' {
		return 0, false
	}
	var n uint64
	for _, c := range id {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	return n, true
}
