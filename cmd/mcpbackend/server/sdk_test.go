package server_test

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcprouter/mcprouter/cmd/mcpbackend/mcpbackendtest"
	"github.com/mcprouter/mcprouter/cmd/mcpbackend/server"
)

// TestSDKClient drives the in-process backend with the official Go SDK client over each
// transport and several revisions.
func TestSDKClient(t *testing.T) {
	opts := mcpbackendtest.CheckOptions{ExtraTools: 120, PageSize: 50}
	s := mcpbackendtest.Start(t, server.Config{ExtraTools: opts.ExtraTools, PageSize: opts.PageSize, Tick: time.Hour})
	transports := []struct {
		name     string
		versions []string
		connect  func(t *testing.T) mcp.Transport
	}{
		{"streamable", []string{"", "2025-11-25", "2025-06-18", "2025-03-26"}, func(t *testing.T) mcp.Transport {
			return &mcp.StreamableClientTransport{Endpoint: s.URL(), MaxRetries: -1}
		}},
		{"sse", []string{"", "2024-11-05"}, func(t *testing.T) mcp.Transport {
			return &mcp.SSEClientTransport{Endpoint: s.SSEURL()}
		}},
		{"stdio", []string{"", "2024-11-05"}, func(t *testing.T) mcp.Transport { return stdioPipe(t, s) }},
	}
	for _, tr := range transports {
		for _, v := range tr.versions {
			name := tr.name + "/" + v
			if v == "" {
				name = tr.name + "/sdk-default"
			}
			t.Run(name, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 2*mcpbackendtest.Wait)
				defer cancel()
				c := mcpbackendtest.Connect(t, ctx, tr.connect(t), v)
				want := v
				if want == "" { // the SDK probes server/discover, which a dual-era server answers
					want = "2026-07-28"
				}
				if c.Version() != want {
					t.Fatalf("negotiated %s, want %s", c.Version(), want)
				}
				mcpbackendtest.Check(t, ctx, c, opts)
			})
		}
	}
}

// stdioPipe serves one stdio session of s over in-memory pipes and returns the client's
// end.
func stdioPipe(t *testing.T, s *server.Server) mcp.Transport {
	inR, inW := io.Pipe()   // client -> server
	outR, outW := io.Pipe() // server -> client
	done := make(chan error, 1)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { done <- s.ServeStdio(ctx, inR, outW); outW.Close() }()
	t.Cleanup(func() {
		inW.Close()
		cancel()
		select {
		case err := <-done:
			if err != nil && err != context.Canceled {
				t.Errorf("ServeStdio: %v", err)
			}
		case <-time.After(mcpbackendtest.Wait):
			t.Error("ServeStdio did not return after stdin closed")
		}
	})
	return &mcp.IOTransport{Reader: outR, Writer: inW}
}

// TestSDKClientEras: the SDK's default client (2026-07-28 first, initialize as the
// fall-back) against a server of each era, and a 2025 client against a 2026-only one.
func TestSDKClientEras(t *testing.T) {
	opts := mcpbackendtest.CheckOptions{ExtraTools: 3, PageSize: 5}
	for _, tc := range []struct {
		eras server.Eras
		pin  string // the client's version, "" for the SDK's default
		want string // negotiated; "" when connecting must fail
	}{
		{server.ErasLegacy, "", "2025-11-25"},
		{server.ErasModern, "", "2026-07-28"},
		{server.ErasModern, "2025-11-25", ""},
	} {
		t.Run(tc.eras.String()+"/"+tc.pin, func(t *testing.T) {
			s := mcpbackendtest.Start(t, server.Config{ExtraTools: opts.ExtraTools, PageSize: opts.PageSize, Tick: time.Hour, Eras: tc.eras})
			for _, tr := range []struct {
				name string
				t    func() mcp.Transport
			}{
				{"streamable", func() mcp.Transport { return &mcp.StreamableClientTransport{Endpoint: s.URL(), MaxRetries: -1} }},
				{"stdio", func() mcp.Transport { return stdioPipe(t, s) }},
			} {
				t.Run(tr.name, func(t *testing.T) {
					ctx, cancel := context.WithTimeout(context.Background(), 2*mcpbackendtest.Wait)
					defer cancel()
					if tc.want == "" {
						client := mcp.NewClient(&mcp.Implementation{Name: "old", Version: "1"}, nil)
						cs, err := client.Connect(ctx, tr.t(), &mcp.ClientSessionOptions{ProtocolVersion: tc.pin})
						if err == nil {
							cs.Close()
							t.Fatal("a 2025-11-25 client connected to a 2026-07-28-only server")
						}
						// The SDK reports an HTTP refusal by its status only; the body is
						// checked by TestModernHTTP.
						if tr.name == "stdio" && !strings.Contains(err.Error(), "2026-07-28") {
							t.Errorf("the refusal does not name the version spoken: %v", err)
						}
						return
					}
					c := mcpbackendtest.Connect(t, ctx, tr.t(), tc.pin)
					if c.Version() != tc.want {
						t.Fatalf("negotiated %s, want %s", c.Version(), tc.want)
					}
					mcpbackendtest.Check(t, ctx, c, opts)
				})
			}
		})
	}
}

// TestTickSubscription checks the timer-driven resource through a real client.
func TestTickSubscription(t *testing.T) {
	s := mcpbackendtest.Start(t, server.Config{Tick: 5 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), mcpbackendtest.Wait)
	defer cancel()
	c := mcpbackendtest.Connect(t, ctx, &mcp.StreamableClientTransport{Endpoint: s.URL(), MaxRetries: -1}, "")
	if err := c.Session.Subscribe(ctx, &mcp.SubscribeParams{URI: "counter://tick"}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		select {
		case u := <-c.Updated:
			if u != "counter://tick" {
				t.Fatalf("updated %s", u)
			}
		case <-ctx.Done():
			t.Fatal("no tick notification")
		}
	}
}
