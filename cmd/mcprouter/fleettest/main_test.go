package fleettest

import (
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/internal/testbin"
)

func TestMain(m *testing.M) { testbin.Main(m) }

// wait bounds every single client operation and every condition the tests wait for,
// unless a test says otherwise.
const wait = 20 * time.Second

// proc is one process a test started.
type proc = testbin.Proc

// waitFor polls cond until it holds or d passes; it returns whether it held.
func waitFor(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(25 * time.Millisecond)
	}
}
