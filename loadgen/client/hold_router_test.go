package client_test

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/cmd/mcpbackend/mcpbackendtest"
	backendsrv "github.com/mcprouter/mcprouter/cmd/mcpbackend/server"
	"github.com/mcprouter/mcprouter/cmd/mcprouter/app"
	"github.com/mcprouter/mcprouter/cmd/mcprouter/app/apptest"
	"github.com/mcprouter/mcprouter/loadgen/client"
)

// A Holder through a real router, its sessions opened with and without pipelining
// (Options.Pipeline: notifications/initialized, the subscription and the GET in one
// write): every session is held with its stream open, and the one update caused
// afterwards reaches each of them once.
func TestHolderThroughRouter(t *testing.T) {
	const sessions = 12
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	backend := mcpbackendtest.Start(t, backendsrv.Config{Tick: -1, Logger: quiet})
	prefix := ""
	router := apptest.Start(t, app.Config{
		Listen:   "127.0.0.1:0",
		Backends: []app.BackendConfig{{Name: "ref", URL: backend.URL(), Prefix: &prefix}},
	}, quiet, 20*time.Second)
	for _, pipeline := range []bool{true, false} {
		name := map[bool]string{true: "pipelined", false: "one-by-one"}[pipeline]
		t.Run(name, func(t *testing.T) {
			h, err := client.NewHolder(client.Options{URL: router.URL(), Pipeline: pipeline}, "memo://board")
			if err != nil {
				t.Fatal(err)
			}
			defer h.Close(4, 5*time.Second)
			if got := h.Open(sessions, 4, 10*time.Second); got.Held != sessions || got.Failed != 0 {
				t.Fatalf("opened %+v", got)
			}
			h.Arm()
			trigger := time.Now()
			touch(t, router.URL())
			r := h.Collect(trigger, 20*time.Second)
			if r.Received != sessions || r.Missing != 0 || r.Duplicates != 0 {
				t.Fatalf("round: received %d, missing %d, duplicates %d", r.Received, r.Missing, r.Duplicates)
			}
		})
	}
}

// touch changes memo://board through url with a session of its own.
func touch(t *testing.T, url string) {
	t.Helper()
	d, err := client.NewDialer(client.Options{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	s, err := d.Dial(0, time.Now().Add(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(time.Now().Add(5 * time.Second))
	var rep client.Reply
	if err := s.Call(&client.Request{Method: "tools/call", Name: []byte("touch"),
		Params: []byte(`{"name":"touch","arguments":{"uri":"memo://board"}}`)}, time.Now().Add(10*time.Second), &rep); err != nil {
		t.Fatal(err)
	}
}
