package app

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	backendsrv "github.com/mcprouter/mcprouter/cmd/mcpbackend/server"
)

// ReferenceBackends starts n reference backends (mcpbackend) in-process on loopback and
// adds them to cfg, so that a router started without any backend is useful from the first
// command: two backends show the merged catalog and the name prefixes. stop ends them.
func ReferenceBackends(cfg *Config, n int, log *slog.Logger) (stop func(), err error) {
	names := []string{"alpha", "beta", "gamma", "delta"}
	var servers []*backendsrv.Server
	stop = func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for _, s := range servers {
			s.Close(ctx)
		}
	}
	for i := 0; i < n; i++ {
		name := names[i%len(names)]
		if i >= len(names) {
			name = fmt.Sprintf("%s%d", name, i/len(names))
		}
		// Tools and prompts are prefixed by the router; resources are not (a URI names one
		// resource): only the first lists its resources, so nothing collides.
		s, err := backendsrv.New(backendsrv.Config{Name: name, Logger: log.With("backend", name), UnlistedResources: i > 0})
		if err != nil {
			stop()
			return nil, err
		}
		if err := s.Listen("127.0.0.1:0"); err != nil {
			stop()
			return nil, err
		}
		servers = append(servers, s)
		cfg.Backends = append(cfg.Backends, BackendConfig{Name: name, URL: s.URL()})
		log.Info("reference backend started in-process", "name", name, "url", s.URL())
	}
	return stop, nil
}
