package app

import (
	"fmt"
	"time"

	"github.com/mcprouter/mcprouter/transport"
	"github.com/mcprouter/mcprouter/transport/budget"
)

// Defaults of the sessions' memory budget (SessionsConfig.BudgetBytes, ShareBytes). A
// share must hold the largest message a backend may send (8 MiB) with room to spare.
const (
	defaultBudgetBytes = 1 << 30
	defaultShareBytes  = 16 << 20
)

// defaults fills the fairness and budget keys of the sessions section.
func (c *SessionsConfig) defaults() {
	if c.MaxPerClient == 0 {
		c.MaxPerClient = transport.DefaultMaxPerClient
	}
	if c.InitTimeout == 0 {
		c.InitTimeout = transport.DefaultInitTimeout
	}
	if c.InitRate == 0 {
		c.InitRate = transport.DefaultInitRate
	}
	if c.InitBurst == 0 {
		c.InitBurst = transport.DefaultInitBurst
	}
	if c.BudgetBytes == 0 {
		c.BudgetBytes = defaultBudgetBytes
	}
	if c.ShareBytes == 0 {
		c.ShareBytes = min(defaultShareBytes, max(c.BudgetBytes, 0))
	}
}

// validate checks the fairness and budget keys (after defaults).
func (c *SessionsConfig) validate() error {
	switch {
	case c.MaxPerClient < -1:
		return fmt.Errorf("sessions.max_per_client: %d (a positive cap, or -1 for none)", c.MaxPerClient)
	case c.InitTimeout < 0 && c.InitTimeout != -time.Second:
		return fmt.Errorf("sessions.init_timeout: %v (a positive duration, or -1s for none)", c.InitTimeout)
	case c.InitRate < 0 && c.InitRate != -1:
		return fmt.Errorf("sessions.init_rate: %v (new sessions per second per address, or -1 for no limit)", c.InitRate)
	case c.BudgetBytes < -1:
		return fmt.Errorf("sessions.budget_bytes: %d (bytes, or -1 for no budget)", c.BudgetBytes)
	case c.BudgetBytes > 0 && (c.ShareBytes <= 0 || c.ShareBytes > c.BudgetBytes):
		return fmt.Errorf("sessions.share_bytes: %d must be positive and at most sessions.budget_bytes (%d)", c.ShareBytes, c.BudgetBytes)
	}
	return nil
}

// registryConfig is the transport's registry configuration from the sessions section,
// with the budget every session draws on (nil when off).
func (c *SessionsConfig) registryConfig() transport.RegistryConfig {
	return transport.RegistryConfig{
		MaxSessions:  c.Max,
		MaxPerClient: c.MaxPerClient,
		IdleTimeout:  c.IdleTimeout,
		InitTimeout:  c.InitTimeout,
		Budget:       budget.New(c.BudgetBytes, c.ShareBytes),
	}
}
