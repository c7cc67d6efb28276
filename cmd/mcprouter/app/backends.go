package app

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/mcprouter/mcprouter/router/fleet"
	"github.com/mcprouter/mcprouter/transport/natsbus"
	"github.com/mcprouter/mcprouter/transport/upstream"
)

// fleetConfig turns the configured backends into the fleet's configuration: one dialer
// per replica URL or child process.
func fleetConfig(cfg *Config, log *slog.Logger, bus *natsbus.Bus) (fleet.Config, error) {
	fc := fleet.Config{ClientName: "mcprouter", ClientVersion: Version, Logger: log,
		HealthInterval: cfg.Health.Interval, HealthTimeout: cfg.Health.Timeout,
		MaxSubscriptions: cfg.Limits.MaxSubscriptionsPerSession, MaxServerRequests: cfg.Limits.MaxPendingServerRequests,
		ServerRequestTimeout: cfg.Limits.ServerRequestTimeout,
		MaxUpstreamSessions:  cfg.Limits.MaxUpstreamSessions, UpstreamSessionWait: cfg.Limits.UpstreamSessionWait}
	key, err := cfg.RequestState.key()
	if err != nil {
		return fc, err
	}
	fc.StateKey = key
	for i, b := range cfg.Backends {
		creds, err := buildBackendAuth(cfg, i, log)
		if err != nil {
			return fc, err
		}
		bc := fleet.BackendConfig{
			Name: b.Name, Prefix: *b.Prefix, Timeout: b.Timeout,
			MaxConcurrency: b.MaxConcurrency, PerClient: b.Sessions == "per-client", SessionIdle: b.SessionIdle,
			Era:    map[string]fleet.Era{"2025": fleet.Era2025, "2026": fleet.Era2026}[b.Era],
			Digest: backendDigest(&cfg.Backends[i]),
		}
		urls := b.URLs
		if b.URL != "" {
			urls = append([]string{b.URL}, urls...)
		}
		opts := upstream.HTTPOptions{Name: b.Name, Logger: log, MaxConns: b.MaxConcurrency}
		b.Pipeline.apply(&opts)
		for _, u := range urls {
			if opts.PipelineShort {
				opts.CallTimes = upstream.NewCallTimes() // per replica, shared by its sessions
			}
			opts.PipeStats = upstream.NewPipeStats() // per replica too, for its metrics
			bc.Dialers = append(bc.Dialers, urlDialer(u, opts, creds))
		}
		if len(b.Command) > 0 {
			ds, err := stdioDialers(b, log)
			if err != nil {
				return fc, err
			}
			bc.Dialers = append(bc.Dialers, ds...)
		}
		if b.NATS != "" {
			// Each instance is one upstream session; the service's queue group spreads
			// new sessions over its processes, so instances >= processes uses them all.
			for i := 0; i < b.Instances; i++ {
				svc, name := b.NATS, b.Name
				bc.Dialers = append(bc.Dialers, fleet.Dialer{
					Addr: fmt.Sprintf("nats:%s#%d", svc, i),
					Dial: func(ctx context.Context, sink upstream.Sink) (upstream.Conn, error) {
						return upstream.DialNATS(ctx, bus.NC, svc, upstream.NATSOptions{Name: name, Logger: log}, sink)
					},
				})
			}
		}
		fc.Backends = append(fc.Backends, bc)
	}
	return fc, nil
}

// apply sets the pipelining of an HTTP backend's options: PipelineShort for auto,
// Pipeline for a number of connections, nothing for off.
func (p PipelineSetting) apply(o *upstream.HTTPOptions) {
	switch {
	case p.Off:
	case p.Conns > 0:
		o.Pipeline = p.Conns
	default:
		o.PipelineShort = true
	}
}

// urlDialer picks the transport by URL: a path ending in /sse is a legacy HTTP+SSE
// server, anything else speaks Streamable HTTP. Each upstream session gets the
// backend's credentials for whom it is dialed: a client's own (token exchange) when the
// fleet dials it for that client with upstream.WithClient, the router's otherwise.
func urlDialer(u string, base upstream.HTTPOptions, creds *backendCreds) fleet.Dialer {
	legacy := strings.HasSuffix(strings.TrimRight(strings.SplitN(u, "?", 2)[0], "/"), "/sse")
	return fleet.Dialer{Addr: u, Dial: func(ctx context.Context, sink upstream.Sink) (upstream.Conn, error) {
		opts := base
		opts.Credentials = creds.forDial(ctx)
		if legacy {
			return upstream.DialSSE(ctx, u, opts, sink)
		}
		return upstream.DialHTTP(ctx, u, opts, sink)
	}}
}

// stdioDialers start one child process per instance when dialed. The process is
// supervised (restarted with backoff) by the upstream package; the fleet dials again only
// when an instance is lost for good.
func stdioDialers(b BackendConfig, log *slog.Logger) ([]fleet.Dialer, error) {
	cmd := upstream.Command{Path: b.Command[0], Args: b.Command[1:], Env: b.Env, EnvAllow: b.EnvAllow}
	opts := upstream.StdioOptions{Name: b.Name, Logger: log}
	var ds []fleet.Dialer
	for i := 0; i < b.Instances; i++ {
		ds = append(ds, fleet.Dialer{
			Addr: fmt.Sprintf("%s#%d", strings.Join(b.Command, " "), i),
			Dial: func(ctx context.Context, sink upstream.Sink) (upstream.Conn, error) {
				p, err := upstream.StartPool(cmd, 1, opts, func(int) upstream.Sink { return sink })
				if err != nil {
					return nil, err
				}
				return p.Conn(0), nil
			},
		})
	}
	return ds, nil
}
