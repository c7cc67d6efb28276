package loadgen_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/cmd/mcpbackend/mcpbackendtest"
	backendsrv "github.com/mcprouter/mcprouter/cmd/mcpbackend/server"
	"github.com/mcprouter/mcprouter/cmd/mcprouter/app"
	"github.com/mcprouter/mcprouter/cmd/mcprouter/app/apptest"
	"github.com/mcprouter/mcprouter/loadgen"
	"github.com/mcprouter/mcprouter/loadgen/client"
)

// TestFanoutListen runs fan-out mode on the stateless revision: five subscribers each
// hold a subscriptions/listen stream on memo://board and ten touch calls change it,
// straight to the reference backend (2026-07-28 only) and through the router in front
// of a backend of both eras (the router then holds the upstream listen stream). Every
// subscriber must receive every update, once.
func TestFanoutListen(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	direct := mcpbackendtest.Start(t, backendsrv.Config{Tick: -1, Eras: backendsrv.ErasModern, Logger: quiet})
	behind := mcpbackendtest.Start(t, backendsrv.Config{Tick: -1, Eras: backendsrv.ErasBoth, Logger: quiet})
	prefix := ""
	router := apptest.Start(t, app.Config{
		Listen: "127.0.0.1:0", Stateless: "on",
		Backends: []app.BackendConfig{{Name: "ref", URL: behind.URL(), Prefix: &prefix}},
	}, quiet, 20*time.Second)

	for _, tt := range []struct{ name, url string }{
		{"backend", direct.URL()},
		{"router", router.URL()},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			rep, err := loadgen.Run(ctx, loadgen.Config{
				Target: client.Options{URL: tt.url, Protocol: client.Version20260728}, Mode: loadgen.Fanout,
				Sessions: 5, Duration: time.Second,
				Fanout: loadgen.FanoutSpec{URI: "memo://board", Rate: 10, Trigger: loadgen.OpSpec{Tool: "touch", Args: `{"uri":"memo://board"}`}},
			}, nil)
			if err != nil {
				t.Fatal(err)
			}
			f := rep.Fanout
			if f == nil {
				t.Fatal("no fan-out section")
			}
			if f.Subscribers != 5 || f.Triggers != 10 || f.Expected != 50 {
				t.Errorf("subscribers %d triggers %d expected %d, want 5 10 50 (warnings %v)", f.Subscribers, f.Triggers, f.Expected, rep.Generator.Warnings)
			}
			if f.Delivered != f.Expected || f.Missing != 0 || f.Duplicates != 0 {
				t.Errorf("delivered %d of %d, missing %d, duplicates %d", f.Delivered, f.Expected, f.Missing, f.Duplicates)
			}
			if rep.Errors != 0 || rep.Sessions.Streams != 0 {
				t.Errorf("errors %d (%v), streams %d", rep.Errors, rep.FirstErrors, rep.Sessions.Streams)
			}
		})
	}
}

// TestFanoutListenRefused: a resource the server does not serve is left out of the
// acknowledgement; mcpload counts that subscriber's listen as failed, not as a
// subscriber that receives nothing.
func TestFanoutListenRefused(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	direct := mcpbackendtest.Start(t, backendsrv.Config{Tick: -1, Eras: backendsrv.ErasModern, Logger: quiet})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rep, err := loadgen.Run(ctx, loadgen.Config{
		Target: client.Options{URL: direct.URL(), Protocol: client.Version20260728}, Mode: loadgen.Fanout,
		Sessions: 2, Duration: 300 * time.Millisecond,
		Fanout: loadgen.FanoutSpec{URI: "nope://x", Rate: 10, Trigger: loadgen.OpSpec{Tool: "touch", Args: `{"uri":"memo://board"}`}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Fanout == nil || rep.Fanout.Subscribers != 0 || rep.Fanout.Delivered != 0 {
		t.Fatalf("fan-out %+v, want no subscriber", rep.Fanout)
	}
	if m := rep.ByMethod["subscriptions/listen"]; m == nil || m.Errors != 2 {
		t.Errorf("subscriptions/listen %+v, want 2 failed (first errors %v)", m, rep.FirstErrors)
	}
}
