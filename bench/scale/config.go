package scale

import (
	"errors"
	"fmt"
	"time"

	"github.com/mcprouter/mcprouter/loadgen/client"
)

// PerProcess is the most sessions the defaults put on one router or one loader: each
// held session is a connection at both ends, a process may hold at most 20,000
// descriptors here, and the loaders' POST connections, NATS and the backend take a few
// more.
const PerProcess = 14000

// Config shapes a run. Zero values take the defaults noted.
type Config struct {
	// Sessions is the number of sessions held (default 10,000).
	Sessions int
	// Routers and Loaders are the router and mcpload processes (default: enough for
	// PerProcess sessions each, at least 2 of each).
	Routers, Loaders int
	// Protocol is the revision the sessions speak: 2025-11-25 (default: GET streams and
	// resources/subscribe) or 2026-07-28 (subscriptions/listen streams).
	Protocol string
	// SourceAddrs are the loopback addresses the loaders connect from (default
	// 127.0.0.2-127.0.0.9).
	SourceAddrs string
	// Concurrency is the sessions each loader opens at once (default 128).
	Concurrency int
	// Persist keeps the routers' session records in JetStream, as a default router
	// does; false sets sessions.no_persist.
	Persist bool
	// SessionStorage is nats.jetstream.session_storage of the router that runs the
	// NATS server, which decides where the records' bucket is: file or memory
	// (default: the router's default, memory).
	SessionStorage string
	// Callers is the closed loop of tools/call kept running throughout (default 2
	// sessions, one call at a time each, CallPause between calls, default 5ms).
	Callers   int
	CallPause time.Duration
	// Updates is the number of updates caused, a second apart (default 1).
	Updates int
	// Wait bounds the update's arrival at every session (default 60s); Settle is the
	// pause before the memory is read, once the sessions are open (default 3s).
	Wait, Settle time.Duration
	// Dir holds the binaries, configurations and logs (default: a new temporary
	// directory, removed at the end unless Keep).
	Dir  string
	Keep bool
	// Bins are prebuilt mcprouter, mcpbackend and mcpload binaries by name; the
	// missing ones are built with go build.
	Bins map[string]string
	// Profiles makes each loader write its CPU profile and its heap profile (once its
	// sessions are open) beside its log in Dir, and saves each router's CPU profile
	// of the opening (routerN.cpu.pprof: from its start, for about as long as it
	// lasts) and heap profile once the sessions are held (routerN.heap.pprof, and routerN.heap.txt
	// with the runtime's memory statistics before that collection; the
	// routers' admin listeners serve pprof).
	Profiles bool
	// Logf receives progress lines (default: none).
	Logf func(format string, args ...any)
}

func (c *Config) defaults() error {
	if c.Sessions <= 0 {
		c.Sessions = 10000
	}
	per := (c.Sessions + PerProcess - 1) / PerProcess
	if c.Routers <= 0 {
		c.Routers = max(2, per)
	}
	if c.Loaders <= 0 {
		c.Loaders = max(2, per)
	}
	if c.Protocol == "" {
		c.Protocol = client.Version20251125
	}
	if c.Protocol != client.Version20251125 && c.Protocol != client.Version20260728 {
		return fmt.Errorf("scale: protocol %q: want %s (GET streams) or %s (subscriptions/listen)", c.Protocol, client.Version20251125, client.Version20260728)
	}
	if c.SourceAddrs == "" {
		c.SourceAddrs = "127.0.0.2-127.0.0.9"
	}
	if _, err := client.ParseSourceAddrs(c.SourceAddrs); err != nil {
		return fmt.Errorf("scale: %w", err)
	}
	if c.Concurrency <= 0 {
		c.Concurrency = 128
	}
	if c.Callers <= 0 {
		c.Callers = 2
	}
	if c.Updates <= 0 {
		c.Updates = 1
	}
	if c.CallPause <= 0 {
		c.CallPause = 5 * time.Millisecond
	}
	if c.Wait <= 0 {
		c.Wait = time.Minute
	}
	if c.Settle <= 0 {
		c.Settle = 3 * time.Second
	}
	if c.Logf == nil {
		c.Logf = func(string, ...any) {}
	}
	if c.Sessions/c.Routers > 19000 || c.Sessions/c.Loaders > 19000 {
		return errors.New("scale: more than 19,000 sessions on one process would pass its descriptor limit: add routers or loaders")
	}
	return nil
}
