package tsclient

import (
	"testing"

	"github.com/mcprouter/mcprouter/internal/testbin"
)

// TestMain builds the router (and the fixtures) once for every test of the package.
func TestMain(m *testing.M) { testbin.Main(m) }
