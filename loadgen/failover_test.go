package loadgen_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/mcprouter/mcprouter/cmd/mcpbackend/mcpbackendtest"
	backendsrv "github.com/mcprouter/mcprouter/cmd/mcpbackend/server"
	"github.com/mcprouter/mcprouter/cmd/mcprouter/app"
	"github.com/mcprouter/mcprouter/cmd/mcprouter/app/apptest"
	"github.com/mcprouter/mcprouter/internal/testbin"
	"github.com/mcprouter/mcprouter/loadgen"
	"github.com/mcprouter/mcprouter/loadgen/client"
	"github.com/mcprouter/mcprouter/transport/natsbus"
)

// startNATS runs one NATS server with JetStream on a loopback port, where router
// instances keep their sessions.
func startNATS(t *testing.T) string {
	t.Helper()
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoSigs: true, NoLog: true})
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(20 * time.Second) {
		t.Fatal("NATS not ready")
	}
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	return s.ClientURL()
}

// Sessions spread over two router instances on one NATS; one instance is killed
// (SIGKILL) under load: its sessions move to the other with their ids (adopted there,
// never opened again), their GET streams resume there, and every call is answered.
func TestSessionsMoveToAnotherInstance(t *testing.T) {
	testbin.Long(t, "starts a router process and kills it")
	natsURL := startNATS(t)
	backend := mcpbackendtest.Start(t, backendsrv.Config{Tick: -1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})

	cfgFile := filepath.Join(t.TempDir(), "a.yaml")
	cfg := fmt.Sprintf("listen: 127.0.0.1:0\nadmin: {listen: \"off\"}\nbackends:\n  - {name: ref, url: %q, prefix: \"\"}\nnats: {url: %q, name: doomed, replicas: 1, lease: 5s}\n",
		backend.URL(), natsURL)
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	doomed := testbin.Start(t, testbin.Spec{Bin: testbin.BuildFixture(t, testbin.Router), Args: []string{"--config", cfgFile}, Ready: []string{"mcprouter listening"}})
	prefix := ""
	survivor := apptest.Start(t, app.Config{
		Listen:   "127.0.0.1:0",
		Backends: []app.BackendConfig{{Name: "ref", URL: backend.URL(), Prefix: &prefix}},
		NATS:     natsbus.Config{URL: natsURL, Name: "survivor", Replicas: 1, Lease: 5 * time.Second},
	}, slog.New(slog.NewTextHandler(io.Discard, nil)), 20*time.Second)

	// The doomed instance dies once every session has completed calls for a while.
	var once sync.Once
	killed := make(chan struct{})
	progress := func(p loadgen.Progress) {
		if p.Phase == "measuring" && p.Requests > 200 {
			once.Do(func() {
				doomed.Kill()
				close(killed)
			})
		}
	}
	const sessions = 4
	rep, err := loadgen.Run(context.Background(), loadgen.Config{
		Target:   client.Options{URL: "http://" + doomed.Addr() + "/mcp", URLs: []string{survivor.URL()}, Stream: true},
		Sessions: sessions, Warmup: 500 * time.Millisecond, Duration: 4 * time.Second, Timeout: 10 * time.Second,
		Mix: []loadgen.OpSpec{{Tool: "echo", Args: `{"text":"hi"}`}},
	}, progress)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-killed:
	default:
		t.Fatalf("the run ended before the instance was killed: %d requests", rep.Requests)
	}
	s := rep.Sessions
	t.Logf("requests %d errors %d %v first %v; sessions moved %d, re-established %d; survivor adopted %d, resumed %d streams",
		rep.Requests, rep.Errors, rep.ErrorsByClass, rep.FirstErrors, s.Moved, s.Reconnects,
		survivor.HTTP.Stats.Adopted.Load(), survivor.HTTP.Stats.Resumes.Load())
	// Half the sessions opened on the doomed instance; each moved once, kept its id
	// (adopted, not opened again), and lost no call.
	if s.Moved != sessions/2 || s.Reconnects != 0 || s.Opened != sessions {
		t.Errorf("sessions: moved %d (want %d), re-established %d (want 0), opened %d", s.Moved, sessions/2, s.Reconnects, s.Opened)
	}
	if got := survivor.HTTP.Stats.Adopted.Load(); got != sessions/2 {
		t.Errorf("the survivor adopted %d sessions, want %d", got, sessions/2)
	}
	if rep.Errors != 0 {
		t.Errorf("%d calls failed: %v %v", rep.Errors, rep.ErrorsByClass, rep.FirstErrors)
	}
	if survivor.HTTP.Stats.Resumes.Load() == 0 {
		t.Error("no GET stream resumed on the survivor with Last-Event-ID")
	}
}
