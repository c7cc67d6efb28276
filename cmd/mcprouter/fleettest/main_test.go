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
