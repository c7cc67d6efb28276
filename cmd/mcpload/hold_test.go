package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/cmd/mcpbackend/mcpbackendtest"
	"github.com/mcprouter/mcprouter/cmd/mcpbackend/server"
	"github.com/mcprouter/mcprouter/cmd/mcprouter/app"
	"github.com/mcprouter/mcprouter/cmd/mcprouter/app/apptest"
	"github.com/mcprouter/mcprouter/loadgen/client"
)

// TestHold drives `mcpload hold` as a benchmark command does, against the reference
// backend, on both generations of streams: every held session receives the one update
// caused after arm, and collect says so.
func TestHold(t *testing.T) {
	const sessions = 20
	for _, protocol := range []string{client.Version20251125, client.Version20260728} {
		t.Run(protocol, func(t *testing.T) {
			url := mcpbackendtest.Start(t, server.Config{Tick: -1, MaxSessions: 100}).URL()
			inR, inW := io.Pipe()
			outR, outW := io.Pipe()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			done := make(chan int, 1)
			go func() {
				done <- holdCmd(ctx, []string{"--url", url, "--sessions", fmt.Sprint(sessions), "--protocol", protocol,
					"--uri", "memo://board", "--concurrency", "4", "--source-addrs", "127.0.0.2-127.0.0.3", "--close"}, inR, outW, io.Discard)
				outW.Close()
			}()
			out := bufio.NewScanner(outR)
			expect := func(word string, v any) {
				t.Helper()
				if !out.Scan() {
					t.Fatalf("hold ended before %q: %v", word, out.Err())
				}
				got, payload, _ := strings.Cut(out.Text(), " ")
				if got != word {
					t.Fatalf("got %q, want %s ...", out.Text(), word)
				}
				if v != nil {
					if err := json.Unmarshal([]byte(payload), v); err != nil {
						t.Fatalf("%s: %v", out.Text(), err)
					}
				}
			}
			var opened client.HoldOpened
			expect("ready", &opened)
			if opened.Held != sessions || opened.Failed != 0 || opened.End < opened.Start {
				t.Fatalf("opened %+v", opened)
			}
			fmt.Fprintln(inW, "arm")
			expect("ok", nil)

			trigger := time.Now()
			touch(t, url, protocol)

			fmt.Fprintf(inW, "collect %d 30s\n", trigger.UnixNano())
			var round client.HoldRound
			expect("ok", &round)
			if round.Received != sessions || round.Missing != 0 || round.Latency == nil {
				t.Fatalf("round %+v", round)
			}
			fmt.Fprintln(inW, "collect nonsense")
			expect("error", nil)
			fmt.Fprintln(inW, "quit")
			if code := <-done; code != exitOK {
				t.Fatalf("exit %d", code)
			}
		})
	}
}

// touch changes memo://board through url with a session of its own.
func touch(t *testing.T, url, protocol string) {
	t.Helper()
	d, err := client.NewDialer(client.Options{URL: url, Protocol: protocol})
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

// A Holder through a real router, its sessions opened with and without pipelining
// (client.Options.Pipeline: notifications/initialized, the subscription and the GET in
// one write): every session is held with its stream open, and the one update caused
// afterwards reaches each of them once.
func TestHolderThroughRouter(t *testing.T) {
	const sessions = 12
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	backend := mcpbackendtest.Start(t, server.Config{Tick: -1, Logger: quiet})
	prefix := ""
	router := apptest.Start(t, app.Config{
		Listen:   "127.0.0.1:0",
		Backends: []app.BackendConfig{{Name: "ref", URL: backend.URL(), Prefix: &prefix}},
	}, quiet, 20*time.Second)
	for _, pipeline := range []bool{true, false} {
		t.Run(fmt.Sprintf("pipeline=%v", pipeline), func(t *testing.T) {
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
			touch(t, router.URL(), "")
			r := h.Collect(trigger, 20*time.Second)
			if r.Received != sessions || r.Missing != 0 || r.Duplicates != 0 {
				t.Fatalf("round: received %d, missing %d, duplicates %d", r.Received, r.Missing, r.Duplicates)
			}
		})
	}
}
