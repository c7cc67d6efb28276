package scale

import (
	"strings"
	"testing"
)

func TestCountState(t *testing.T) {
	table := `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1 0000000000000000 100 0 0 10 0
   1: 0200007F:A1B2 0100007F:1F90 06 00000000:00000000 03:00000F5A 00000000     0        0 0 3 0000000000000000
   2: 0200007F:A1B3 0100007F:1F90 06 00000000:00000000 03:00000F5A 00000000     0        0 0 3 0000000000000000
   3: 0200007F:A1B4 0100007F:1F90 01 00000000:00000000 00:00000000 00000000     0        0 2 1 0000000000000000 20 4 30 10 -1
`
	if n := countState(strings.NewReader(table), []byte("06")); n != 2 {
		t.Fatalf("countState = %d, want 2 (the TIME_WAIT lines)", n)
	}
	if n := countState(strings.NewReader(table), []byte("0A")); n != 1 {
		t.Fatalf("countState = %d, want 1 (the listening line)", n)
	}
}
