package cluster

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/loadgen/client"
)

// Watchers are sessions subscribed to one resource, spread over the router instances
// (each moving to another instance when its own dies), that note when each last heard
// that the resource changed.
type Watchers struct {
	d     *client.Dialer
	sess  []client.Session
	last  []atomic.Int64 // unix nanoseconds of the latest notifications/resources/updated
	count []atomic.Int64
}

var updated = []byte("notifications/resources/updated")

// Watch opens n sessions with GET streams on urls (session i on urls[i mod len]) and
// subscribes each to uri.
func Watch(urls []string, n int, uri string, timeout time.Duration) (*Watchers, error) {
	w := &Watchers{last: make([]atomic.Int64, n), count: make([]atomic.Int64, n)}
	opts := client.Options{URL: urls[0], URLs: urls[1:], Stream: true,
		OnNotification: func(i int, m *codec.Message, at time.Time) {
			if i >= 0 && i < n && string(m.Method) == string(updated) {
				w.last[i].Store(at.UnixNano())
				w.count[i].Add(1)
			}
		}}
	d, err := client.NewDialer(opts)
	if err != nil {
		return nil, err
	}
	w.d = d
	params := []byte(fmt.Sprintf(`{"uri":%q}`, uri))
	for i := range n {
		s, err := d.Dial(i, time.Now().Add(timeout))
		if err != nil {
			w.Close()
			return nil, fmt.Errorf("watcher %d: %w", i, err)
		}
		w.sess = append(w.sess, s)
		var rep client.Reply
		if err := s.Call(&client.Request{Method: "resources/subscribe", Params: params}, time.Now().Add(timeout), &rep); err != nil {
			w.Close()
			return nil, fmt.Errorf("watcher %d subscribe: %w", i, err)
		}
	}
	return w, nil
}

// Len is the number of watchers.
func (w *Watchers) Len() int { return len(w.sess) }

// Deliveries is the number of notifications received in all.
func (w *Watchers) Deliveries() int64 {
	var n int64
	for i := range w.count {
		n += w.count[i].Load()
	}
	return n
}

// Moves is how many times the watchers' sessions moved to another instance.
func (w *Watchers) Moves() int64 {
	var n int64
	for _, s := range w.sess {
		n += s.Info().Moves
	}
	return n
}

// errLate is returned by Await when a watcher heard nothing new in time.
var errLate = errors.New("no update in time")

// Await waits until every watcher heard of a change after since, at most within of
// since; it returns how long after since the last of them did (polling every 20ms)
// and how many had not by then.
func (w *Watchers) Await(since time.Time, within time.Duration) (time.Duration, int, error) {
	deadline := since.Add(within)
	for {
		missing := 0
		for i := range w.last {
			if w.last[i].Load() < since.UnixNano() {
				missing++
			}
		}
		now := time.Now()
		if missing == 0 {
			var worst int64
			for i := range w.last {
				worst = max(worst, w.last[i].Load()-since.UnixNano())
			}
			return time.Duration(worst), 0, nil
		}
		if now.After(deadline) {
			return now.Sub(since), missing, errLate
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Close ends the sessions.
func (w *Watchers) Close() {
	for _, s := range w.sess {
		s.Close(time.Now().Add(5 * time.Second))
	}
	if w.d != nil {
		w.d.Close()
	}
}
