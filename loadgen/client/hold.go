package client

import (
	"bytes"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/internal/ctxtime"
)

// Holder holds many idle sessions subscribed to one resource, each with its
// server-to-client stream open (a GET stream on the session revisions, a
// subscriptions/listen stream on the stateless one), and times the arrival of one
// update at every session: the measure of a router's fan-out and idle memory at scale.
// Each session costs one stream reader goroutine blocked in read, and one receipt
// time; nothing per notification is allocated.
//
// A Holder is driven from one goroutine: Open, then any number of rounds of Arm and
// Collect, then Close.
type Holder struct {
	d    *Dialer
	uri  []byte
	sub  Request  // resources/subscribe to uri, the same for every session
	uris []string // uri, for subscriptions/listen, shared read-only by the sessions
	sess []Session

	round atomic.Pointer[holdRound] // nil: not armed
	at    []atomic.Int64            // receipt time (Unix ns) of the armed update, per session; 0: none yet
	held  atomic.Int64              // sessions open and subscribed
	fails atomic.Int64              // sessions that failed to open
}

// holdRound is the state of one armed update that the stream readers share.
type holdRound struct {
	received, dups atomic.Int64
	allIn          chan struct{} // closed when every held session received it
	once           sync.Once
}

// HoldOpened is the outcome of Holder.Open.
type HoldOpened struct {
	Held, Failed int
	// Start and End bound the opening (Unix ns): the first dial to the last
	// subscription acknowledged.
	Start, End int64
	// FirstError is the first failure, for the operator ("" without one).
	FirstError string `json:",omitempty"`
}

// HoldRound is the outcome of one update: receipt latencies from the trigger time.
type HoldRound struct {
	Received, Missing, Duplicates int64
	Latency                       *hdr.Snapshot // nanoseconds
}

// NewHolder prepares a Holder of sessions subscribed to uri. o.OnNotification is
// replaced by the Holder's own; o.Stream is set for the session revisions.
func NewHolder(o Options, uri string) (*Holder, error) {
	if uri == "" {
		return nil, errors.New("client: a holder needs a resource URI")
	}
	h := &Holder{uri: []byte(uri), uris: []string{uri}}
	params := codec.AppendString([]byte(`{"uri":`), uri)
	h.sub = Request{Method: "resources/subscribe", Name: h.uri, Params: append(params, '}')}
	o.OnNotification = h.onNotification
	o.Stream = o.Protocol != Version20260728
	d, err := NewDialer(o)
	if err != nil {
		return nil, err
	}
	if d.o.Transport != HTTP {
		d.Close()
		return nil, errors.New("client: a holder needs the Streamable HTTP transport")
	}
	h.d = d
	return h, nil
}

// Open opens n sessions, at most concurrency at a time, each subscribed to the
// resource before it counts as held; each step has the timeout. Sessions that fail are
// counted and left out. Open may be called once.
func (h *Holder) Open(n, concurrency int, timeout time.Duration) HoldOpened {
	h.sess = make([]Session, n)
	h.at = make([]atomic.Int64, n)
	concurrency = max(1, min(concurrency, n))
	var next atomic.Int64
	var firstErr atomic.Value
	start := time.Now()
	var wg sync.WaitGroup
	for range concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var rep Reply // each opener's, reused from session to session
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				s, err := h.open(i, timeout, &rep)
				if err != nil {
					h.fails.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
					continue
				}
				h.sess[i] = s
				h.held.Add(1)
			}
		}()
	}
	wg.Wait()
	out := HoldOpened{Held: int(h.held.Load()), Failed: int(h.fails.Load()), Start: start.UnixNano(), End: time.Now().UnixNano()}
	if e, ok := firstErr.Load().(string); ok {
		out.FirstError = e
	}
	return out
}

// Progress returns the sessions held and failed so far; it may be called while Open
// runs.
func (h *Holder) Progress() (held, failed int) { return int(h.held.Load()), int(h.fails.Load()) }

// open dials session i and subscribes it; rep takes the subscription's reply. With
// Options.Pipeline the subscription travels with the session's GET (Dialer.DialCall).
func (h *Holder) open(i int, timeout time.Duration, rep *Reply) (Session, error) {
	deadline := time.Now().Add(timeout)
	if h.d.o.Protocol != Version20260728 {
		return h.d.DialCall(i, deadline, &h.sub, rep)
	}
	s, err := h.d.Dial(i, deadline)
	if err != nil {
		return nil, err
	}
	if err := s.(Listener).Listen(h.uris, deadline); err != nil {
		s.Close(time.Now().Add(timeout))
		return nil, err
	}
	return s, nil
}

// Arm forgets the previous round's receipts: the next update of the resource each
// session receives is timed.
func (h *Holder) Arm() {
	h.round.Store(nil)
	for i := range h.at {
		h.at[i].Store(0)
	}
	h.round.Store(&holdRound{allIn: make(chan struct{})})
}

// Collect waits until every held session received the armed update, or for wait, and
// returns the latencies from trigger (the time the update was caused).
func (h *Holder) Collect(trigger time.Time, wait time.Duration) HoldRound {
	hr := h.round.Load()
	if hr == nil {
		return HoldRound{Missing: h.held.Load(), Latency: hdr.New(1, 2, 1).Export()}
	}
	ctxtime.Wait(hr.allIn, wait)
	h.round.Store(nil)
	hist := hdr.New(1, int64(10*time.Minute), 3)
	r := HoldRound{Duplicates: hr.dups.Load()}
	t0 := trigger.UnixNano()
	for i := range h.at {
		if at := h.at[i].Load(); at != 0 {
			r.Received++
			_ = hist.RecordValue(max(at-t0, 1))
		}
	}
	r.Missing = h.held.Load() - r.Received
	r.Latency = hist.Export()
	return r
}

// onNotification times the first update of the resource a session receives while
// armed. It runs on the sessions' stream readers.
func (h *Holder) onNotification(i int, m *codec.Message, at time.Time) {
	hr := h.round.Load()
	if hr == nil || string(m.Method) != "notifications/resources/updated" || !bytes.Equal(m.URI, h.uri) || i >= len(h.at) {
		return
	}
	if !h.at[i].CompareAndSwap(0, at.UnixNano()) {
		hr.dups.Add(1)
		return
	}
	if hr.received.Add(1) >= h.held.Load() {
		hr.once.Do(func() { close(hr.allIn) })
	}
}

// Close ends every session (DELETE, streams closed), at most concurrency at a time.
func (h *Holder) Close(concurrency int, timeout time.Duration) {
	var wg sync.WaitGroup
	var next atomic.Int64
	for range max(1, concurrency) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(h.sess) {
					return
				}
				if s := h.sess[i]; s != nil {
					s.Close(time.Now().Add(timeout))
				}
			}
		}()
	}
	wg.Wait()
	h.d.Close()
}
