package app

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/mcprouter/mcprouter/transport"
	"github.com/mcprouter/mcprouter/transport/auth"
	"github.com/mcprouter/mcprouter/transport/logsafe"
)

// Authentication of MCP clients (the auth: section, transport/auth): defaults and
// validation of the section, the Authenticator's start, the metadata endpoints and the
// audit log of refused requests. The transport does the checking (transport/authedge.go).

// authStartTimeout bounds the Authenticator's start: a jwt issuer's discovery and first
// JWKS fetch.
const authStartTimeout = 30 * time.Second

// authDefaults fills the auth section's defaults. The deprecated
// security.allow_unauthenticated is the explicit off it was before auth.mode existed.
func (c *Config) authDefaults() {
	if c.Security.AllowUnauthenticated && c.Auth.Mode == "" {
		c.Auth.Mode = auth.ModeOff
	}
	c.Auth.Defaults()
}

// validateAuth checks the auth section, naming the bad key (auth.<key>). It runs after
// validateExposure, whose refusal of a missing mode on an exposed listener says what
// to set.
func (c *Config) validateAuth() error { return c.Auth.Validate(isLoopback(c.Listen)) }

// startAuth builds the Authenticator of the configuration (for jwt: the issuer's
// discovery, now, so that a wrong issuer fails the start) and says what the operator
// should know: a deprecated key, clients served unauthenticated on an exposed listener.
func startAuth(cfg *Config, log *slog.Logger) (*auth.Authenticator, error) {
	if cfg.Security.AllowUnauthenticated {
		log.Warn("security.allow_unauthenticated is deprecated: set auth.mode: off instead (or bearer, jwt to authenticate MCP clients)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), authStartTimeout)
	defer cancel()
	a, err := auth.New(ctx, cfg.Auth, auth.Options{Logger: log.With("component", "auth")})
	if err != nil {
		return nil, fmt.Errorf("auth: %w", err)
	}
	if !a.Enabled() && !isLoopback(cfg.Listen) {
		log.Warn("MCP clients are not authenticated (auth.mode: off) on a listener reachable beyond this machine", "listen", cfg.Listen)
	}
	return a, nil
}

// auditLogger is the logger of refused requests: one line each, a few a second at most
// (an attacker provokes them at will), with the count of those dropped.
func auditLogger(log *slog.Logger) *slog.Logger {
	return logsafe.Logger(log, 10, 50)
}

// withMetadata serves the protected resource metadata at paths (none with
// authentication off, which leaves h as it is) and passes every other request to h.
func withMetadata(h fasthttp.RequestHandler, srv *transport.HTTPServer, paths []string) fasthttp.RequestHandler {
	if len(paths) == 0 {
		return h
	}
	at := make(map[string]bool, len(paths))
	for _, p := range paths {
		at[p] = true
	}
	return func(ctx *fasthttp.RequestCtx) {
		if at[string(ctx.Path())] {
			srv.ServeMetadata(ctx)
			return
		}
		h(ctx)
	}
}
