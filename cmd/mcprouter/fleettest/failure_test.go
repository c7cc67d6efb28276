package fleettest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/internal/testwait"
)

// failBound is how soon after a backend dies the calls it held must have failed: far
// below the backends' 60s timeout, so an error within it comes from the router seeing
// the loss, not from a timer.
const failBound = 10 * time.Second

// load keeps calling tools from its own sessions until stopped, counting what happened.
type load struct {
	ok, failed atomic.Int64
	mu         sync.Mutex
	errs       []string
	stop       chan struct{}
	stopOnce   sync.Once
	wg         sync.WaitGroup
}

// startLoad runs one loop per call function until stop; each loop calls in turn.
func startLoad(calls ...func(i int) error) *load {
	l := &load{stop: make(chan struct{})}
	for _, call := range calls {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for i := 0; ; i++ {
				select {
				case <-l.stop:
					return
				default:
				}
				if err := call(i); err != nil {
					l.failed.Add(1)
					l.mu.Lock()
					if len(l.errs) < 20 {
						l.errs = append(l.errs, err.Error())
					}
					l.mu.Unlock()
				} else {
					l.ok.Add(1)
				}
			}
		}()
	}
	return l
}

// finish stops the loops and waits for them (each call is bounded by wait); it may be
// called again (deferred as well as called).
func (l *load) finish(t *testing.T) {
	t.Helper()
	l.stopOnce.Do(func() { close(l.stop) })
	done := make(chan struct{})
	go func() { l.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * wait):
		t.Fatalf("the load did not stop within %v", 2*wait)
	}
}

// echoLoad calls echo on the given backends in turn through c and checks the answers.
func echoLoad(c *sdkClient, name string, backends ...string) func(int) error {
	return func(i int) error {
		b := backends[i%len(backends)]
		text := fmt.Sprintf("%s %d", name, i)
		res, err := c.call(b+"__echo", map[string]any{"text": text})
		if err != nil {
			return fmt.Errorf("%s: %s__echo: %w", name, b, err)
		}
		if got := sdkText(res); res.IsError || got != text {
			return fmt.Errorf("%s: %s__echo answered %q", name, b, got)
		}
		return nil
	}
}

func mcpgoEchoLoad(c *mcpgoClient, name string, backends ...string) func(int) error {
	return func(i int) error {
		b := backends[i%len(backends)]
		text := fmt.Sprintf("%s %d", name, i)
		res, err := c.call(b+"__echo", map[string]any{"text": text}, nil)
		if err != nil {
			return fmt.Errorf("%s: %s__echo: %w", name, b, err)
		}
		if got := mcpgoText(res); res.IsError || got != text {
			return fmt.Errorf("%s: %s__echo answered %q", name, b, got)
		}
		return nil
	}
}

// TestBackendKilledMidLoad kills the HTTP backend and the legacy SSE backend while they
// hold many calls from several sessions, and while other sessions keep every other
// backend busy: the calls they held fail with the router's "unavailable" error well
// before any timeout, new calls to them fail fast too, and not one call to the other
// backends fails.
func TestBackendKilledMidLoad(t *testing.T) {
	f := startFleet(t)
	const sessions, perSession = 4, 3
	victims := map[string]*proc{bigName: f.big, oldName: f.old}
	type outcome struct {
		backend string
		err     error
		at      time.Time
	}
	held := make(chan outcome, len(victims)*sessions*perSession)
	for i := 0; i < sessions; i++ {
		c := connectSDK(t, f, clientOptions{sse: i%2 == 1})
		for b := range victims {
			for k := 0; k < perSession; k++ {
				go func() {
					res, err := c.call(b+"__sleep", map[string]any{"ms": 15000})
					if err == nil && !res.IsError {
						err = fmt.Errorf("the call completed: %s", sdkText(res))
					}
					held <- outcome{b, err, time.Now()}
				}()
			}
		}
	}
	others := []string{kidsName, pairName}
	l := startLoad(
		echoLoad(connectSDK(t, f, clientOptions{}), "sdk-load", others...),
		echoLoad(connectSDK(t, f, clientOptions{sse: true}), "sdk-sse-load", others...),
		mcpgoEchoLoad(connectMCPGo(t, f, clientOptions{}), "mcpgo-load", others...),
	)
	defer l.finish(t)
	for b := range victims {
		label := `backend="` + b + `"`
		if !testwait.Poll(wait, func() bool { return f.metric("mcprouter_backend_in_flight_requests", label) == sessions*perSession }) {
			t.Fatalf("the calls did not all reach %s: %v in flight", b, f.metric("mcprouter_backend_in_flight_requests", label))
		}
	}
	okBefore := l.ok.Load()

	killed := time.Now()
	for _, p := range victims {
		p.Kill()
	}

	for i := 0; i < cap(held); i++ {
		select {
		case o := <-held:
			if code := rpcCode(o.err); code != codec.CodeBackendUnavailable {
				t.Errorf("a call held by the killed %s ended with %v (code %d), want code %d", o.backend, o.err, code, codec.CodeBackendUnavailable)
			}
			if d := o.at.Sub(killed); d > failBound {
				t.Errorf("a call held by the killed %s failed %v after the kill, want within %v", o.backend, d, failBound)
			}
		case <-time.After(failBound):
			t.Fatalf("%d of %d calls held by the killed backends got no answer within %v of the kill", cap(held)-i, cap(held), failBound)
		}
	}
	// New calls to the dead backends fail fast, with the same error.
	c := connectSDK(t, f, clientOptions{})
	for b := range victims {
		for i := 0; i < 3; i++ {
			start := time.Now()
			_, err := c.call(b+"__echo", map[string]any{"text": "anyone?"})
			if code := rpcCode(err); code != codec.CodeBackendUnavailable {
				t.Errorf("a call to the dead %s ended with %v (code %d), want code %d", b, err, code, codec.CodeBackendUnavailable)
			}
			if d := time.Since(start); d > failBound {
				t.Errorf("a call to the dead %s took %v to fail, want within %v", b, d, failBound)
			}
		}
	}
	// The others kept working all along and still do.
	if !testwait.Poll(wait, func() bool { return l.ok.Load() >= okBefore+30 }) {
		t.Errorf("the other backends served only %d calls after the kill", l.ok.Load()-okBefore)
	}
	l.finish(t)
	if n := l.failed.Load(); n > 0 {
		t.Errorf("%d calls to the other backends failed while big and old died (of %d); first ones:\n%v", n, n+l.ok.Load(), l.errs)
	}
	t.Logf("%d calls to the other backends, none failed", l.ok.Load())
	if !testwait.Poll(wait, func() bool { return f.metric("mcprouter_backend_in_flight_requests") == 0 }) {
		t.Errorf("the router still counts requests in flight")
	}
}

// TestBackendRestarted kills the HTTP backend and starts it again on the same address:
// the router sees it come back on its own (its health checks renew the upstream
// session), serves its tools again to the sessions that were open all along, and
// restores the resource subscription the backend forgot.
func TestBackendRestarted(t *testing.T) {
	f := startFleet(t)
	c := connectSDK(t, f, clientOptions{})
	m := connectMCPGo(t, f, clientOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	const uri = "memo://board"
	if err := c.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	c.mustText(t, bigName+"__touch", map[string]any{"uri": uri})
	if !testwait.Poll(wait, func() bool { return c.updatesOf(uri) == 1 }) {
		t.Fatalf("no update of %s before the restart", uri)
	}

	f.big.Kill()
	if _, err := c.call(bigName+"__echo", map[string]any{"text": "x"}); rpcCode(err) != codec.CodeBackendUnavailable {
		t.Errorf("a call to the killed backend ended with %v, want code %d", err, codec.CodeBackendUnavailable)
	}
	f.big = f.restart(t, f.big)
	restarted := time.Now()

	recovered := testwait.Poll(wait, func() bool {
		res, err := c.call(bigName+"__echo", map[string]any{"text": "back?"})
		return err == nil && !res.IsError && sdkText(res) == "back?"
	})
	if !recovered {
		t.Fatalf("the router did not serve %s again within %v of its restart", bigName, wait)
	}
	t.Logf("%s served again %v after its restart", bigName, time.Since(restarted).Round(10*time.Millisecond))
	if res, err := m.call(bigName+"__echo", map[string]any{"text": "mcp-go too"}, nil); err != nil || mcpgoText(res) != "mcp-go too" {
		t.Errorf("mcp-go after the restart: %v %+v", err, res)
	}
	for _, b := range backendNames {
		if got := c.mustText(t, b+"__echo", map[string]any{"text": "all " + b}); got != "all "+b {
			t.Errorf("%s__echo answered %q after the restart", b, got)
		}
	}
	// The new process knows nothing of the subscription: the router must have made it
	// again, so that a change still reaches the subscriber.
	if !testwait.Poll(wait, func() bool {
		c.mustText(t, bigName+"__touch", map[string]any{"uri": uri})
		return testwait.Poll(time.Second, func() bool { return c.updatesOf(uri) >= 2 })
	}) {
		t.Errorf("no update of %s after the restart within %v: the subscription was not restored", uri, wait)
	}
}

// TestLegacyBackendRestarted does the same with the legacy HTTP+SSE backend, whose
// session lives on its event stream.
func TestLegacyBackendRestarted(t *testing.T) {
	f := startFleet(t)
	c := connectSDK(t, f, clientOptions{})
	c.mustText(t, oldName+"__echo", map[string]any{"text": "before"})
	f.old.Kill()
	f.old = f.restart(t, f.old)
	restarted := time.Now()
	if !testwait.Poll(wait, func() bool {
		res, err := c.call(oldName+"__echo", map[string]any{"text": "after"})
		return err == nil && !res.IsError && sdkText(res) == "after"
	}) {
		t.Fatalf("the router did not serve %s again within %v of its restart", oldName, wait)
	}
	t.Logf("%s served again %v after its restart", oldName, time.Since(restarted).Round(10*time.Millisecond))
	// And its server-to-client traffic flows again: a log message finds its client.
	c.mustText(t, oldName+"__log", map[string]any{"message": "old is back", "level": "notice"})
	if !testwait.Poll(wait, func() bool { return len(c.loggersOf("old is back")) == 1 }) {
		t.Errorf("no log message from the restarted %s", oldName)
	}
}

// TestReplicaDown kills the replica of pair that holds the router's resource
// subscription, under load from both clients: traffic moves to the other replica (after
// at most the few calls that were on their way to the dead one), the subscription
// moves with it, and when the replica comes back it takes traffic again.
func TestReplicaDown(t *testing.T) { testReplicaDown(t, startFleet(t)) }

// TestReplicaDownLocalSubscriptions is TestReplicaDown with the subscriptions kept by
// the router process alone (NATS without JetStream), the other way router/fleet keeps
// them.
func TestReplicaDownLocalSubscriptions(t *testing.T) {
	testReplicaDown(t, startFleetWith(t, fleetOptions{noJetStream: true}))
}

func testReplicaDown(t *testing.T, f *fleet) {
	c := connectSDK(t, f, clientOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	uri := ownItem[pairName]
	if err := c.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	direct := [2]*statsReader{readStatsOf(t, f.pair[0]), readStatsOf(t, f.pair[1])}
	// Find the replica holding the upstream subscription: the one whose change is heard.
	holder := -1
	for i := range f.pair {
		before := c.updatesOf(uri)
		direct[i].touch(t, uri)
		if testwait.Poll(2*time.Second, func() bool { return c.updatesOf(uri) > before }) {
			holder = i
			break
		}
	}
	if holder < 0 {
		t.Fatalf("no replica of %s reports changes of %s to the subscriber", pairName, uri)
	}
	survivor := 1 - holder
	t.Logf("the subscription is on replica %d; killing it", holder)

	var served sync.Map // logger -> count, after the kill
	var afterKill atomic.Bool
	logCall := func(c *sdkClient, name string) func(int) error {
		return func(i int) error {
			marker := fmt.Sprintf("%s %d", name, i)
			res, err := c.call(pairName+"__log", map[string]any{"message": marker, "level": "notice"})
			if err != nil {
				return fmt.Errorf("%s: pair__log: %w", name, err)
			}
			if res.IsError {
				return fmt.Errorf("%s: pair__log: %s", name, sdkText(res))
			}
			var loggers []string
			testwait.Poll(wait, func() bool { loggers = c.loggersOf(marker); return len(loggers) > 0 })
			if len(loggers) != 1 {
				return fmt.Errorf("%s: pair__log: log messages from %v", name, loggers)
			}
			if afterKill.Load() {
				n, _ := served.LoadOrStore(loggers[0], new(atomic.Int64))
				n.(*atomic.Int64).Add(1)
			}
			return nil
		}
	}
	sdkLoad := connectSDK(t, f, clientOptions{})
	l := startLoad(
		logCall(sdkLoad, "sdk-load"),
		echoLoad(connectSDK(t, f, clientOptions{sse: true}), "sdk-sse-load", pairName),
		mcpgoEchoLoad(connectMCPGo(t, f, clientOptions{}), "mcpgo-load", pairName),
	)
	defer l.finish(t)
	if !testwait.Poll(wait, func() bool { return l.ok.Load() >= 20 }) {
		t.Fatalf("the load does not run: %d ok, %d failed %v", l.ok.Load(), l.failed.Load(), l.errs)
	}

	afterKill.Store(true)
	okAtKill, failedAtKill := l.ok.Load(), l.failed.Load()
	l.mu.Lock()
	l.errs = nil
	l.mu.Unlock()
	f.pair[holder].Kill()

	// Traffic moves: within the bound, calls succeed again, all on the survivor.
	if !testwait.Poll(wait, func() bool { return l.ok.Load() >= okAtKill+60 }) {
		t.Fatalf("calls to %s did not recover within %v of losing a replica: %d failed; %v", pairName, wait, l.failed.Load()-failedAtKill, l.errs)
	}
	lost := l.failed.Load() - failedAtKill
	t.Logf("calls failed while the replica died: %d (of %d after the kill): %v", lost, lost+l.ok.Load()-okAtKill, l.errs)
	// Each load session may lose the call it had on the dead replica, and the next ones
	// it sent there before the router stopped picking the replica: the router answers a
	// send that failed with an error rather than trying the other replica, and only a
	// refused connection (not a pooled connection found closed) marks the replica down
	// at once. A few per session, then none.
	if lost > 9 {
		t.Errorf("%d calls failed after the replica died, want at most three per session (9): %v", lost, l.errs)
	}
	// The log calls since were all served by the survivor, but for the one that may
	// have been on its way to the dead replica as it died.
	deadName := fmt.Sprintf("%s-%c", pairName, 'a'+holder)
	if n, ok := served.Load(deadName); ok && n.(*atomic.Int64).Load() > 1 {
		t.Errorf("the dead replica answered %d log calls after the kill signal", n.(*atomic.Int64).Load())
	}

	// The subscription moves with the traffic: a change on the survivor is heard. The
	// router moves it when its health check confirms the loss, so changes made before
	// that are not; keep changing the resource until one is heard.
	moved := time.Now()
	before := c.updatesOf(uri)
	if !testwait.Poll(wait, func() bool {
		direct[survivor].touch(t, uri)
		return testwait.Poll(time.Second, func() bool { return c.updatesOf(uri) > before })
	}) {
		t.Errorf("changes of %s on the surviving replica did not reach the subscriber within %v: the subscription stayed on the dead replica", uri, wait)
	} else {
		t.Logf("the subscription moved to the surviving replica within %v", time.Since(moved).Round(100*time.Millisecond))
	}

	// The replica comes back and takes its share again.
	f.pair[holder] = f.restart(t, f.pair[holder])
	served.Delete(deadName)
	if !testwait.Poll(wait, func() bool {
		n, ok := served.Load(deadName)
		return ok && n.(*atomic.Int64).Load() > 0
	}) {
		t.Errorf("the restarted replica took no traffic within %v", wait)
	}
	l.finish(t)
}
