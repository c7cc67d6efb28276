package client_test

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/cmd/mcpbackend/mcpbackendtest"
	backendsrv "github.com/mcprouter/mcprouter/cmd/mcpbackend/server"
	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/internal/testbin"
	"github.com/mcprouter/mcprouter/loadgen/client"
)

// listenWait bounds every wait of these tests: generous on a busy machine, and never
// an assertion about speed.
const listenWait = 30 * time.Second

// startListenRouter starts mcprouter at addr in front of the backend at url; it serves
// 2026-07-28 requests statelessly, so that subscriptions/listen reaches its fan-out.
func startListenRouter(t *testing.T, bin, addr, url string) *testbin.Proc {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "mcprouter.yaml")
	yaml := fmt.Sprintf("listen: %s\nadmin: {listen: \"off\"}\nstateless: on\nbackends:\n  - {name: ref, url: %q, prefix: \"\"}\n", addr, url)
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return testbin.Start(t, testbin.Spec{Name: "mcprouter", Bin: bin, Args: []string{"--config", cfg}, Ready: []string{"mcprouter listening"}, Wait: listenWait})
}

// listenSession dials a 2026-07-28 session over urls and opens its listen stream on
// memo://board; the updates it hears come on the returned channel.
func listenSession(t *testing.T, urls ...string) (client.Session, <-chan struct{}) {
	t.Helper()
	updated := make(chan struct{}, 64)
	d, err := client.NewDialer(client.Options{URL: urls[0], URLs: urls[1:], Protocol: client.Version20260728,
		OnNotification: func(_ int, m *codec.Message, _ time.Time) {
			if string(m.Method) == "notifications/resources/updated" {
				select {
				case updated <- struct{}{}:
				default:
				}
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	s, err := d.Dial(0, time.Now().Add(listenWait))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(time.Now().Add(listenWait)) })
	if err := s.(client.Listener).Listen([]string{"memo://board"}, time.Now().Add(listenWait)); err != nil {
		t.Fatal(err)
	}
	return s, updated
}

// touchUntilUpdated changes memo://board through s until the listen stream hears an
// update: the stream is being opened again in the background meanwhile, and a change
// made before it is acknowledged is not replayed.
func touchUntilUpdated(t *testing.T, s client.Session, updated <-chan struct{}) {
	t.Helper()
	deadline := time.Now().Add(listenWait)
	req := &client.Request{Method: "tools/call", Name: []byte("touch"), Params: []byte(`{"name":"touch","arguments":{"uri":"memo://board"}}`)}
	var rep client.Reply
	for time.Now().Before(deadline) {
		for len(updated) > 0 { // updates of earlier touches
			<-updated
		}
		err := s.Call(req, time.Now().Add(listenWait), &rep)
		if err == nil {
			select {
			case <-updated:
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	t.Fatal("the listen stream heard no update within the wait")
}

// TestListenReopened: mcpload's subscriptions/listen stream outlives the instance it
// was opened on. When the router ends it (stopped, then started again on its address)
// the stream is opened again there; when the instance stops answering (killed), the
// stream moves to the next --url with the session, and hears updates there.
func TestListenReopened(t *testing.T) {
	testbin.Long(t, "starts router processes and stops them")
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	be := mcpbackendtest.Start(t, backendsrv.Config{Tick: -1, Eras: backendsrv.ErasModern, Logger: quiet})
	bin := testbin.BuildFixture(t, testbin.Router)

	t.Run("same instance", func(t *testing.T) {
		addr := testbin.FreeAddr(t)
		r := startListenRouter(t, bin, addr, be.URL())
		s, updated := listenSession(t, "http://"+addr+"/mcp")
		touchUntilUpdated(t, s, updated)
		if !r.Stop(listenWait) {
			t.Fatal("mcprouter did not stop on SIGTERM")
		}
		startListenRouter(t, bin, addr, be.URL())
		touchUntilUpdated(t, s, updated)
	})
	t.Run("next url", func(t *testing.T) {
		a, b := testbin.FreeAddr(t), testbin.FreeAddr(t)
		doomed := startListenRouter(t, bin, a, be.URL())
		startListenRouter(t, bin, b, be.URL())
		s, updated := listenSession(t, "http://"+a+"/mcp", "http://"+b+"/mcp")
		touchUntilUpdated(t, s, updated)
		doomed.Kill()
		touchUntilUpdated(t, s, updated)
		if info := s.Info(); info.URL != "http://"+b+"/mcp" || info.Moves != 1 {
			t.Errorf("the session is on %s after %d moves, want on %s after one", info.URL, info.Moves, "http://"+b+"/mcp")
		}
	})
}
