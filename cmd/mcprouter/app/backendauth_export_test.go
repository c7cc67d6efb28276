package app

import (
	"io"
	"log/slog"

	"github.com/mcprouter/mcprouter/router/fleet"
)

// FleetConfig is fleetConfig for the external tests, which dial backends with the
// dialers it makes.
func FleetConfig(cfg *Config) (fleet.Config, error) {
	return fleetConfig(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
}
