package scale

import (
	"sync"
	"sync/atomic"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/mcprouter/mcprouter/loadgen/client"
)

// caller is the closed loop of tools/call that runs throughout: a few sessions, one
// call at a time each with a pause between calls (a probe, not a load: unpaced, two
// sessions took a router core's worth of calls from the sessions being opened), spread
// over the routers, so that the run says whether the
// routers kept answering while they opened sessions and fanned the update out. Its
// figures are taken by phase (phase switches them).
type caller struct {
	d     *client.Dialer
	pause time.Duration
	stop  chan struct{}
	wg    sync.WaitGroup
	mu    sync.Mutex
	phase *CallStats
	// FirstError is the first failure, for the report.
	firstErr atomic.Value
}

// CallStats are one phase's calls.
type CallStats struct {
	Calls, Errors int64
	hist          *hdr.Histogram
	P50, P99, Max time.Duration
}

func (s *CallStats) finish() {
	if s.hist.TotalCount() > 0 {
		s.P50 = time.Duration(s.hist.ValueAtQuantile(50))
		s.P99 = time.Duration(s.hist.ValueAtQuantile(99))
		s.Max = time.Duration(s.hist.Max())
	}
}

func newCallStats() *CallStats { return &CallStats{hist: hdr.New(1, int64(time.Minute), 3)} }

// startCaller opens n sessions over urls and starts calling; its first phase begins.
func startCaller(urls []string, n int, protocol string, pause time.Duration) (*caller, error) {
	d, err := client.NewDialer(client.Options{URL: urls[0], URLs: urls[1:], Protocol: protocol})
	if err != nil {
		return nil, err
	}
	c := &caller{d: d, pause: pause, stop: make(chan struct{}), phase: newCallStats()}
	var sessions []client.Session
	for i := range n {
		s, err := d.Dial(i, time.Now().Add(30*time.Second))
		if err != nil {
			for _, s := range sessions {
				s.Close(time.Now().Add(5 * time.Second))
			}
			d.Close()
			return nil, err
		}
		sessions = append(sessions, s)
	}
	for _, s := range sessions {
		c.wg.Add(1)
		go c.loop(s)
	}
	return c, nil
}

var echo = client.Request{Method: "tools/call", Name: []byte("echo"), Params: []byte(`{"name":"echo","arguments":{"text":"scale"}}`)}

func (c *caller) loop(s client.Session) {
	defer c.wg.Done()
	defer s.Close(time.Now().Add(5 * time.Second))
	var rep client.Reply
	for {
		select {
		case <-c.stop:
			return
		default:
		}
		t := time.Now()
		err := s.Call(&echo, t.Add(10*time.Second), &rep)
		lat := time.Since(t)
		c.mu.Lock()
		st := c.phase
		st.Calls++
		if err != nil {
			st.Errors++
		}
		_ = st.hist.RecordValue(max(int64(lat), 1))
		c.mu.Unlock()
		pause := c.pause
		if err != nil {
			c.firstErr.CompareAndSwap(nil, err.Error())
			pause = max(pause, 100*time.Millisecond) // a failing router answers at once: do not spin on it
		}
		select {
		case <-c.stop:
			return
		case <-time.After(pause):
		}
	}
}

// next ends the current phase, returns its figures and starts another.
func (c *caller) next() CallStats {
	c.mu.Lock()
	st := c.phase
	c.phase = newCallStats()
	c.mu.Unlock()
	st.finish()
	return *st
}

// close stops the callers and returns the last phase's figures.
func (c *caller) close() CallStats {
	close(c.stop)
	c.wg.Wait()
	st := c.next()
	c.d.Close()
	return st
}

func (c *caller) firstError() string {
	s, _ := c.firstErr.Load().(string)
	return s
}
