package app_test

import (
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/cmd/mcprouter/app"
	"github.com/mcprouter/mcprouter/cmd/mcprouter/app/apptest"
	"github.com/mcprouter/mcprouter/internal/testbin"
	"github.com/mcprouter/mcprouter/internal/testwait"
)

// TestReloadTracing: tracing is turned on and off by reloads, without a restart. Off
// at start, a call leaves no span; a reload turns tracing on, and the next call's
// spans reach the OTLP receiver; a call in flight when a reload turns tracing off
// again ends its spans on the tracer that started them, which exports them and stops
// (the replaced tracer waits for it); a call after that leaves no span.
func TestReloadTracing(t *testing.T) {
	clearOTelEnv(t)
	recv := startReceiver(t)
	backendURL, _ := startSeenBackend(t)
	config := func(tracing string) string {
		return fmt.Sprintf("listen: 127.0.0.1:0\nadmin: {listen: \"off\"}\ntracing: %s\nbackends:\n  - name: b\n    prefix: \"\"\n    url: %s\n", tracing, backendURL)
	}
	off := config("{enabled: false}")
	on := config(fmt.Sprintf("{enabled: true, endpoint: %q, sample_ratio: 1}", recv.url))
	cfg, err := app.ParseConfig([]byte(off))
	if err != nil {
		t.Fatal(err)
	}
	logs := new(testbin.Log)
	a := apptest.Start(t, cfg, slog.New(slog.NewTextHandler(logs, nil)), 20*time.Second)
	file := make(chan string, 1) // the configuration the next reload reads
	a.EnableReload("mcprouter.yaml", func() (app.Config, error) { return app.ParseConfig([]byte(<-file)) })
	reload := func(yaml string) {
		t.Helper()
		file <- yaml
		if err := a.Reload("test"); err != nil {
			t.Fatalf("reload: %v", err)
		}
	}

	c := newRawClient(t, a.URL())
	const (
		before   = "11111111111111111111111111111111" // tracing off at start
		whileOn  = "22222222222222222222222222222222" // after a reload turned it on
		inFlight = "33333333333333333333333333333333" // in flight when it went off
		after    = "44444444444444444444444444444444" // after a reload turned it off
		parent   = "00f067aa0ba902b7"
	)
	call := func(id int, trace, tool, args string) {
		t.Helper()
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s,"_meta":{"traceparent":"00-%s-%s-01"}}}`, id, tool, args, trace, parent)
		if r := c.post(body); r["result"] == nil {
			t.Fatalf("tools/call %s: %v", tool, r)
		}
	}

	call(2, before, "echo", `{"text":"hi"}`)
	reload(on)
	if a.Tracer.Current() == nil {
		t.Fatal("the reload did not turn tracing on")
	}
	call(3, whileOn, "echo", `{"text":"hi"}`)
	ctx := t.Context()
	if err := a.Tracer.ForceFlush(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(recv.trace(whileOn)); n != 2 {
		t.Fatalf("the call after tracing was turned on: %d spans, want the server span and the backend call", n)
	}
	// The HTTP traceparent header is followed from the reload on, as at start.
	const byHeader = "55555555555555555555555555555555"
	if r := c.post(`{"jsonrpc":"2.0","id":30,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`,
		"traceparent", "00-"+byHeader+"-"+parent+"-01"); r["result"] == nil {
		t.Fatalf("tools/call with a traceparent header: %v", r)
	}
	if err := a.Tracer.ForceFlush(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(recv.trace(byHeader)); n != 2 {
		t.Fatalf("the call with a traceparent header after tracing was turned on: %d spans in its trace, want 2", n)
	}

	// Tracing goes off while a call is in flight: the reload runs once the call's
	// trace is started.
	tracer := a.Tracer.Current()
	reloaded := make(chan error, 1)
	go func() {
		if !testwait.Poll(20*time.Second, func() bool { return tracer.Active() > 0 }) {
			reloaded <- errors.New("the call's trace never started")
			return
		}
		file <- off
		reloaded <- a.Reload("test")
	}()
	call(4, inFlight, "sleep", `{"ms":1000}`)
	if err := testwait.Recv(t, "the reload turning tracing off", 20*time.Second, reloaded); err != nil {
		t.Fatalf("reload: %v", err)
	}
	if a.Tracer.Current() != nil {
		t.Fatal("the reload did not turn tracing off")
	}
	call(5, after, "echo", `{"text":"hi"}`)
	testwait.For(t, "the replaced tracer to stop", 20*time.Second, func() bool {
		return logs.Contains("the replaced tracer exported its last spans and stopped")
	})
	if n := len(recv.trace(inFlight)); n != 2 {
		t.Errorf("the call in flight across the reload: %d spans, want its 2 (exported by the tracer that started them)", n)
	}
	for _, tr := range []string{before, after} {
		if n := len(recv.trace(tr)); n != 0 {
			t.Errorf("trace %s, made with tracing off: %d spans arrived, want none", tr, n)
		}
	}
}
