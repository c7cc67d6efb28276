package fleettest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcprouter/mcprouter/internal/ctxtime"
	"github.com/mcprouter/mcprouter/internal/testwait"
)

// progressSteps is the number of steps of the progress calls.
const progressSteps = 5

func wantProgress() []float64 {
	out := make([]float64, progressSteps)
	for i := range out {
		out[i] = float64(i + 1)
	}
	return out
}

// TestProgress runs progress calls on every backend from several sessions at once, all
// sessions using the same progress tokens: each session gets exactly its own
// notifications, in order, under the token it chose (a string for the Go SDK, a number
// for mcp-go).
func TestProgress(t *testing.T) { testProgress(t, startFleet(t)) }

func testProgress(t *testing.T, f *fleet) {
	const sdkSessions, mcpgoSessions = 3, 2
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	args := map[string]any{"steps": progressSteps, "intervalMs": 20}

	type session struct {
		name string
		ev   *events
		// token of the call to backend b, as the client recorded it
		token func(b string) string
	}
	var sessions []session
	for i := 0; i < sdkSessions; i++ {
		c := connectSDK(t, f, clientOptions{})
		name := fmt.Sprintf("sdk%d", i)
		sessions = append(sessions, session{name, &c.events, func(b string) string { return "tok-" + b }})
		for _, b := range backendNames {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), wait)
				defer cancel()
				p := &mcp.CallToolParams{Name: b + "__progress", Arguments: args}
				p.SetProgressToken("tok-" + b)
				res, err := c.cs.CallTool(ctx, p)
				if err != nil || res.IsError {
					errs <- fmt.Errorf("%s: %s__progress: %v %v", name, b, err, res)
				}
			}()
		}
	}
	for i := 0; i < mcpgoSessions; i++ {
		c := connectMCPGo(t, f, clientOptions{})
		name := fmt.Sprintf("mcpgo%d", i)
		sessions = append(sessions, session{name, &c.events, func(b string) string {
			return fmt.Sprint(float64(slices.Index(backendNames, b) + 1))
		}})
		for k, b := range backendNames {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := c.call(b+"__progress", args, k+1) // numeric tokens 1..4
				if err != nil || res.IsError {
					errs <- fmt.Errorf("%s: %s__progress: %v %v", name, b, err, res)
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for _, s := range sessions {
		for _, b := range backendNames {
			tok := s.token(b)
			var got []float64
			testwait.Poll(wait, func() bool { got = s.ev.progressOf(tok); return len(got) >= progressSteps })
			if !slices.Equal(got, wantProgress()) {
				t.Errorf("%s: progress of %s__progress under token %s: %v, want %v", s.name, b, tok, got, wantProgress())
			}
		}
	}
}

// TestCancel cancels, with the Go SDK, a long call on each backend once the backend is
// running it: the client gets its error at once, the router forgets the request and
// counts the cancellation, and the backend hears of it (its own counters, read directly,
// for the HTTP backends). The session keeps working after.
func TestCancel(t *testing.T) {
	f := startFleet(t)
	c := connectSDK(t, f, clientOptions{})
	d := newDirectStats(t, f)

	for _, b := range backendNames {
		t.Run(b, func(t *testing.T) {
			w := d.watchCancel(f, b)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() {
				_, err := c.cs.CallTool(ctx, &mcp.CallToolParams{Name: b + "__sleep", Arguments: map[string]any{"ms": 50000}})
				done <- err
			}()
			w.running(t) // cancel only once the backend runs the call
			cancel()
			if err := testwait.Recv(t, "the cancelled call to return", wait, done); !errors.Is(err, context.Canceled) {
				t.Errorf("cancelled call returned %v, want context.Canceled", err)
			}
			w.cancelled(t)
			if got := c.mustText(t, b+"__echo", map[string]any{"text": "still here"}); got != "still here" {
				t.Errorf("echo after cancel answered %q", got)
			}
		})
	}
}

// sampleAnswer is what a test client answers to sampling/createMessage.
func sampleAnswer(client string) func(string) string {
	return func(prompt string) string { return client + " answers " + prompt }
}

// TestSampling runs the sampling round trip through every backend kind: the backend's
// sampling/createMessage reaches the client that made the call (not another one), the
// client's answer goes back to that backend, and the call's result carries it. Several
// sessions sample at once through the HTTP backends, whose requests travel on the
// call's own reply stream. mcp-go answers too.
func TestSampling(t *testing.T) {
	f := startFleet(t)
	const sessions = 3
	clients := make([]*sdkClient, sessions)
	for i := range clients {
		clients[i] = connectSDK(t, f, clientOptions{sample: sampleAnswer(fmt.Sprintf("sdk%d", i))})
	}
	sample := func(c *sdkClient, client, b, prompt string) error {
		res, err := c.call(b+"__sample", map[string]any{"prompt": prompt})
		if err != nil {
			return fmt.Errorf("%s: %s__sample: %v", client, b, err)
		}
		want := client + " answers " + prompt
		if res.IsError || sdkText(res) != want {
			return fmt.Errorf("%s: %s__sample answered %q (isError %v), want %q", client, b, sdkText(res), res.IsError, want)
		}
		return nil
	}

	t.Run("each-kind", func(t *testing.T) {
		for _, b := range backendNames {
			if err := sample(clients[0], "sdk0", b, "one at a time via "+b); err != nil {
				t.Error(err)
			}
		}
	})

	t.Run("concurrent-http", func(t *testing.T) {
		var wg sync.WaitGroup
		errs := make(chan error, sessions*8)
		for i, c := range clients {
			for _, b := range []string{bigName, pairName} {
				for k := 0; k < 4; k++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						if err := sample(c, fmt.Sprintf("sdk%d", i), b, fmt.Sprintf("prompt %d/%d via %s", i, k, b)); err != nil {
							errs <- err
						}
					}()
				}
			}
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	})

	t.Run("mcp-go", func(t *testing.T) {
		c := connectMCPGo(t, f, clientOptions{sample: sampleAnswer("mcpgo")})
		for _, b := range backendNames {
			prompt := "mcp-go via " + b
			res, err := c.call(b+"__sample", map[string]any{"prompt": prompt}, nil)
			if err != nil {
				t.Errorf("%s__sample: %v", b, err)
				continue
			}
			if want := "mcpgo answers " + prompt; res.IsError || mcpgoText(res) != want {
				t.Errorf("%s__sample answered %q (isError %v), want %q", b, mcpgoText(res), res.IsError, want)
			}
		}
	})

	t.Run("no-capability", func(t *testing.T) {
		// A client without the sampling capability gets the backend's tool error, not a
		// request it cannot answer.
		c := connectSDK(t, f, clientOptions{})
		res, err := c.call(bigName+"__sample", map[string]any{"prompt": "anyone?"})
		if err != nil {
			t.Fatalf("sample without capability: %v", err)
		}
		if !res.IsError {
			t.Errorf("sample without capability answered %q, want an isError result", sdkText(res))
		}
	})
}

// TestResourceUpdated subscribes sessions (Go SDK and mcp-go) to a resource of each
// backend kind, changes the resource with the backend's touch tool, and waits for
// notifications/resources/updated in every subscribed session, and only in those.
func TestResourceUpdated(t *testing.T) {
	f := startFleet(t)
	owned := map[string]string{bigName: "memo://board", kidsName: ownItem[kidsName], oldName: ownItem[oldName], pairName: ownItem[pairName]}
	s1 := connectSDK(t, f, clientOptions{})
	s2 := connectSDK(t, f, clientOptions{})
	m1 := connectMCPGo(t, f, clientOptions{listen: true})
	bystander := connectSDK(t, f, clientOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	for _, b := range backendNames {
		uri := owned[b]
		for i, c := range []*sdkClient{s1, s2} {
			if err := c.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
				t.Fatalf("go-sdk session %d: subscribe %s: %v", i+1, uri, err)
			}
		}
		req := mcpgo.SubscribeRequest{}
		req.Params.URI = uri
		if err := m1.c.Subscribe(ctx, req); err != nil {
			t.Fatalf("mcp-go: subscribe %s: %v", uri, err)
		}
	}
	for _, b := range backendNames {
		t.Run(b, func(t *testing.T) {
			uri := owned[b]
			subscribers := map[string]*events{"go-sdk 1": &s1.events, "go-sdk 2": &s2.events, "mcp-go": &m1.events}
			all := func() bool {
				for _, ev := range subscribers {
					if ev.updatesOf(uri) == 0 {
						return false
					}
				}
				return true
			}
			switch b {
			case pairName:
				// Each replica keeps its own resources, and the router subscribes upstream
				// once per URI, on one of them: touch both directly, so that whichever
				// holds the subscription reports a change.
				for _, p := range f.pair {
					readStatsOf(t, p).touch(t, uri)
				}
			case kidsName:
				// The same holds for kids' two child processes, which only the router
				// reaches: a touch through the router lands on either, so touch until the
				// one holding the subscription was touched (each miss halves the odds).
				for i := 0; i < 20 && !all(); i++ {
					s1.mustText(t, b+"__touch", map[string]any{"uri": uri})
					testwait.Poll(time.Second, all)
				}
			default:
				s1.mustText(t, b+"__touch", map[string]any{"uri": uri})
			}
			testwait.Poll(wait, all)
			for name, ev := range subscribers {
				if ev.updatesOf(uri) == 0 {
					t.Errorf("%s: no notifications/resources/updated for %s within %v", name, uri, wait)
				}
			}
		})
	}
	// Nobody else hears of them.
	for _, b := range backendNames {
		if n := bystander.updatesOf(owned[b]); n != 0 {
			t.Errorf("an unsubscribed session got %d updates of %s", n, owned[b])
		}
	}

	t.Run("unsubscribe", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		uri := owned[bigName]
		if err := s2.cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: uri}); err != nil {
			t.Fatalf("unsubscribe: %v", err)
		}
		before1, before2 := s1.updatesOf(uri), s2.updatesOf(uri)
		s1.mustText(t, bigName+"__touch", map[string]any{"uri": uri})
		if !testwait.Poll(wait, func() bool { return s1.updatesOf(uri) > before1 }) {
			t.Fatalf("the session still subscribed got no update of %s within %v", uri, wait)
		}
		// The update was fanned out to both at once: had s2 been sent one, it would be
		// here by now, give or take the last hop.
		time.Sleep(200 * time.Millisecond)
		if got := s2.updatesOf(uri); got != before2 {
			t.Errorf("the unsubscribed session got %d more updates of %s", got-before2, uri)
		}
	})
}

// TestPerClientStdio puts kids in per-client mode (each client session gets its own
// child processes) and makes many sessions sample and log through it at once. On a
// shared stdio session nothing ties what a backend sends to the request that caused it
// (there is no reply stream): with several calls in flight the router cannot route a
// sampling request or a log message and refuses or drops it. Per-client sessions are
// the configuration for such backends; through them every sampling request and log
// message reaches the client whose call caused it. The backend's catalog must be known
// in this mode too.
func TestPerClientStdio(t *testing.T) {
	f := startFleetWith(t, fleetOptions{perClientKids: true})
	const sessions, calls = 3, 3
	clients := make([]*sdkClient, sessions)
	for i := range clients {
		clients[i] = connectSDK(t, f, clientOptions{sample: sampleAnswer(fmt.Sprintf("sdk%d", i))})
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	n := 0
	for tool, err := range clients[0].cs.Tools(ctx, nil) {
		if err != nil {
			t.Fatalf("tools/list: %v", err)
		}
		if strings.HasPrefix(tool.Name, kidsName+"__") {
			n++
		}
	}
	if n != len(builtinTools) {
		t.Fatalf("tools/list shows %d tools of the per-client backend, want %d", n, len(builtinTools))
	}

	var wg sync.WaitGroup
	errs := make(chan error, sessions*calls*2)
	for i, c := range clients {
		for k := 0; k < calls; k++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				client := fmt.Sprintf("sdk%d", i)
				prompt := fmt.Sprintf("per-client %d/%d", i, k)
				res, err := c.call(kidsName+"__sample", map[string]any{"prompt": prompt})
				if err != nil {
					errs <- fmt.Errorf("%s: kids__sample: %v", client, err)
				} else if want := client + " answers " + prompt; res.IsError || sdkText(res) != want {
					errs <- fmt.Errorf("%s: kids__sample answered %q, want %q", client, sdkText(res), want)
				}
				marker := fmt.Sprintf("log %d/%d", i, k)
				if _, err := c.call(kidsName+"__log", map[string]any{"message": marker, "level": "notice"}); err != nil {
					errs <- fmt.Errorf("%s: kids__log: %v", client, err)
					return
				}
				var got []string
				testwait.Poll(wait, func() bool { got = c.loggersOf(marker); return len(got) > 0 })
				if len(got) != 1 || got[0] != kidsName {
					errs <- fmt.Errorf("%s: log message %q arrived from %v, want once from kids", client, marker, got)
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestCancelStorm sends, from several sessions, calls each followed at once by its
// cancellation, so that many cancellations reach the router before it has sent their
// request on (the request is routed, not yet forwarded): every call ends, answered or
// cancelled, nothing stays in flight in the router or in the backend, and the sessions
// keep working. With mcprouter built with the race detector, this is where races
// between a cancellation and the forwarding of its request show.
func TestCancelStorm(t *testing.T) {
	f := startFleet(t)
	const sessions, calls = 4, 120
	var answered, silent atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, sessions*calls)
	raws := make([]*rawSession, sessions)
	for s := range raws {
		raws[s] = newRawSession(t, f)
	}
	for s, rs := range raws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var inner sync.WaitGroup
			for i := 0; i < calls; i++ {
				id := 1000 + i
				b := backendNames[(s+i)%len(backendNames)]
				inner.Add(1)
				go func() {
					defer inner.Done()
					msgs, err := rs.post(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"%s__sleep","arguments":{"ms":200}}}`, id, b))
					switch {
					case err != nil:
						errs <- fmt.Errorf("session %d call %d: %v", s, id, err)
					case len(msgs) == 0:
						silent.Add(1)
					default:
						answered.Add(1)
					}
				}()
				if _, err := rs.post(fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":%d}}`, id)); err != nil {
					errs <- fmt.Errorf("session %d cancel %d: %v", s, id, err)
				}
			}
			inner.Wait()
		}()
	}
	if !ctxtime.WaitGroup(&wg, 2*wait) {
		t.Fatalf("the calls did not all end within %v", 2*wait)
	}
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	t.Logf("%d calls: %d answered before their cancellation took effect, %d cancelled", sessions*calls, answered.Load(), silent.Load())
	if !testwait.Poll(wait, func() bool {
		return f.metric("mcprouter_backend_in_flight_requests") == 0 && f.metric("mcprouter_requests_in_flight") == 0
	}) {
		m, _ := f.metrics()
		t.Errorf("requests stay in flight in the router:\n%s\n%s", m.grep("mcprouter_backend_in_flight"), m.grep("mcprouter_requests_in_flight"))
	}
	r := readStatsOf(t, f.big)
	if !testwait.Poll(wait, func() bool { s, err := r.read(); return err == nil && s.InFlight == 0 }) {
		s, _ := r.read()
		t.Errorf("big still runs %d calls after every one ended or was cancelled", s.InFlight)
	}
	c := connectSDK(t, f, clientOptions{})
	for _, b := range backendNames {
		if got := c.mustText(t, b+"__echo", map[string]any{"text": "after the storm"}); got != "after the storm" {
			t.Errorf("%s__echo answered %q", b, got)
		}
	}
}
