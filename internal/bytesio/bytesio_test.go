package bytesio

import (
	"errors"
	"strings"
	"testing"
	"testing/iotest"
)

var errBig = errors.New("too large")

func TestAppendAtMost(t *testing.T) {
	for _, tt := range []struct {
		name, in string
		limit    int
		want     string
		err      error
	}{
		{"fits", "hello", 5, "hello", nil},
		{"empty", "", 5, "", nil},
		{"over", "hello!", 5, "hello!", errBig},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := AppendAtMost(make([]byte, 0, 2), iotest.OneByteReader(strings.NewReader(tt.in)), tt.limit, errBig)
			if string(got) != tt.want || !errors.Is(err, tt.err) {
				t.Errorf("got %q, %v; want %q, %v", got, err, tt.want, tt.err)
			}
		})
	}
	errRead := errors.New("read failed")
	if _, err := AppendAtMost(nil, iotest.ErrReader(errRead), 5, errBig); !errors.Is(err, errRead) {
		t.Errorf("read error: %v", err)
	}
}

// Reading into a buffer large enough allocates nothing.
func TestAppendAtMostNoAlloc(t *testing.T) {
	buf := make([]byte, 0, 64)
	r := strings.NewReader("")
	if n := testing.AllocsPerRun(100, func() {
		r.Reset("a reply body")
		buf, _ = AppendAtMost(buf[:0], r, 64, errBig)
	}); n != 0 {
		t.Errorf("%v allocations", n)
	}
}
