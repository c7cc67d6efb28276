package cluster

import (
	"testing"

	"github.com/mcprouter/mcprouter/internal/testbin"
)

// TestMain keeps the router binary built once for every run of TestInstanceKilled.
func TestMain(m *testing.M) { testbin.Main(m) }
