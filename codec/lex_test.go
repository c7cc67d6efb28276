package codec

import (
	"encoding/binary"
	"testing"
	"unicode/utf8"
)

// TestKeyWords checks the word constants the envelope and params scanners match keys
// with against the strings they stand for.
func TestKeyWords(t *testing.T) {
	for _, k := range []struct {
		word uint64
		mask uint64
		key  string
	}{
		{kJSONRPC, ^uint64(0), `jsonrpc"`},
		{kID, mask3, `id"`},
		{kMethod, mask7, `method"`},
		{kParams, mask7, `params"`},
		{kResult, mask7, `result"`},
		{kError, mask6, `error"`},
		{kName, mask5, `name"`},
		{kURI, mask4, `uri"`},
		{kMeta, mask6, `_meta"`},
		{kCursor, mask7, `cursor"`},
	} {
		var w [8]byte
		copy(w[:], k.key)
		wantMask := ^uint64(0)
		if len(k.key) < 8 {
			wantMask = 1<<(8*len(k.key)) - 1
		}
		if got := binary.LittleEndian.Uint64(w[:]); got != k.word || k.mask != wantMask {
			t.Errorf("%q: word %#x mask %#x, want %#x mask %#x", k.key, k.word, k.mask, got, wantMask)
		}
	}
}

// TestStrSpecial checks the SWAR mask against a byte-by-byte definition for every
// byte value in every position of a word, and next to each kind of neighbour.
func TestStrSpecial(t *testing.T) {
	special := func(c byte) bool { return c == '"' || c == '\\' || c < 0x20 || c >= 0x80 }
	for pos := range 8 {
		for c := range 256 {
			for _, fill := range []byte{'a', 0x00, 0xff, '"'} {
				var w [8]byte
				for k := range w {
					w[k] = 'a'
				}
				for k := pos + 1; k < 8; k++ {
					w[k] = fill // bytes above may be anything
				}
				w[pos] = byte(c)
				m := strSpecial(binary.LittleEndian.Uint64(w[:]))
				first := -1
				for k := range w {
					if special(w[k]) {
						first = k
						break
					}
				}
				got := -1
				if m != 0 {
					got = trailingByte(m)
				}
				if got != first {
					t.Fatalf("word % x: first special at %d, mask says %d", w, first, got)
				}
			}
		}
	}
}

func trailingByte(m uint64) int {
	for k := range 8 {
		if m>>(8*k)&0xff != 0 {
			return k
		}
	}
	return -1
}

func TestUTF8Len(t *testing.T) {
	tests := []struct {
		in   string
		want int
	}{
		{"\xc2\x80", 2}, {"\xdf\xbf", 2}, {"\xc1\xbf", 0}, {"\xc2", 0}, {"\xc2\x7f", 0},
		{"\xe0\xa0\x80", 3}, {"\xe0\x9f\xbf", 0}, {"\xed\x9f\xbf", 3}, {"\xed\xa0\x80", 0}, {"\xef\xbf\xbf", 3}, {"\xe1\x80", 0},
		{"\xf0\x90\x80\x80", 4}, {"\xf0\x8f\xbf\xbf", 0}, {"\xf4\x8f\xbf\xbf", 4}, {"\xf4\x90\x80\x80", 0}, {"\xf5\x80\x80\x80", 0},
		{"\x80", 0}, {"\xff", 0},
	}
	for _, tt := range tests {
		if got := utf8Len([]byte(tt.in), 0); got != tt.want {
			t.Errorf("utf8Len(% x) = %d, want %d", tt.in, got, tt.want)
		}
	}
	// Against the standard library, over every lead and second byte and the
	// boundary values of the others.
	edges := []byte{0x00, 0x7f, 0x80, 0x8f, 0x90, 0x9f, 0xa0, 0xbf, 0xc0, 0xff}
	for c0 := 0x80; c0 < 0x100; c0++ {
		for c1 := range 0x100 {
			for _, c2 := range edges {
				for _, c3 := range edges {
					for n := 2; n <= 4; n++ {
						seq := []byte{byte(c0), byte(c1), c2, c3}[:n]
						want := 0
						if r, size := utf8.DecodeRune(seq); r != utf8.RuneError || size > 1 {
							want = size
						}
						if got := utf8Len(seq, 0); got != want {
							t.Fatalf("utf8Len(% x) = %d, want %d", seq, got, want)
						}
					}
				}
			}
		}
	}
}
