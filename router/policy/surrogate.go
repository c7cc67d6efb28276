package policy

import "bytes"

// fastjson keeps a lone surrogate escape (\ud800 not followed by its low half) as the six
// characters it was written with, which is also what "\\ud800" (an escaped backslash)
// decodes to: a rule could not tell the two apart, and a backend decoding with
// encoding/json (or the codec, codec.Unquote) sees U+FFFD instead. Rewriting each lone
// surrogate escape to \ufffd before the parse makes the arguments the rules read the
// same as the backend's. The rewrite keeps every length, so it is done in a copy only
// when there is one.

// replaceLoneSurrogates returns b with every lone surrogate escape inside its strings
// written as \ufffd: b itself when it has none, else a copy.
func replaceLoneSurrogates(b []byte) []byte {
	out := b
	for i := 0; i < len(b); i++ {
		j := bytes.IndexByte(b[i:], '\\') // most arguments have no escape at all
		if j < 0 {
			break
		}
		if i += j; i+1 >= len(b) {
			break
		}
		if b[i+1] != 'u' {
			i++ // an escape of another character, such as \\ or \"
			continue
		}
		r, ok := hex4(b, i+2)
		if !ok || r < 0xd800 || r > 0xdfff {
			i++
			continue
		}
		if r < 0xdc00 { // a high half: whole when a low half's escape follows at once
			if i+11 < len(b) && b[i+6] == '\\' && b[i+7] == 'u' {
				if lo, ok := hex4(b, i+8); ok && lo >= 0xdc00 && lo <= 0xdfff {
					i += 11
					continue
				}
			}
		}
		if &out[0] == &b[0] {
			out = append([]byte(nil), b...)
		}
		copy(out[i+2:i+6], "fffd")
		i += 5
	}
	return out
}

// hex4 reads the four hex digits of a \u escape at b[at:].
func hex4(b []byte, at int) (rune, bool) {
	if at+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[at : at+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}
