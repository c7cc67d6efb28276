package fleet

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/bytedance/sonic"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/internal/ctxtime"
	"github.com/mcprouter/mcprouter/router/modern"
	"github.com/mcprouter/mcprouter/transport/upstream"
)

// listener keeps the one subscriptions/listen stream of a 2026-07-28 instance's shared
// connection, which replaces both the GET stream and resources/subscribe of a 2025
// session: it always asks for the three list changes (so the catalog stays fresh), and
// for the resource URIs this router instance holds on that instance (add, remove, from
// subsUpstream). What the stream brings goes where a 2025 backend's notifications go
// (notices.fromBackend): list changes to the catalog and the other routers, resource
// updates to the subscribers, over NATS in a cluster.
//
// A change of the URIs opens a new stream with the new filter before the old one is
// closed, so that no update falls between the two; a stream that ends (the backend
// restarted, or closed it gracefully) is opened again with backoff, and the catalog is
// fetched again since list changes may have been missed meanwhile. Every stream's
// acknowledgement (acked, from notices) says which URIs the backend honours; add waits
// for it, so that a client's resources/subscribe is answered once it holds.
//
// run is the one goroutine that opens and closes streams (started by the fleet when
// the connection comes up, ended with the connection or the fleet); add and remove are
// called from subscription work, acked from the connection's reader goroutine. Its lock
// guards the filter and the acknowledgements; no I/O happens under it.
type listener struct {
	c     *upConn
	table *table
	log   *slog.Logger
	kick  chan struct{} // one slot: the filter changed

	mu      sync.Mutex
	uris    map[string]struct{}
	ver     uint64            // bumped by each change of uris
	streams map[uint64]uint64 // listen request id → the filter version it asked for
	ackVer  uint64            // the filter version of the newest acknowledged stream
	honored map[string]struct{}
	ackCh   chan struct{} // closed (and replaced) at each acknowledgement
}

func newListener(c *upConn, t *table, log *slog.Logger) *listener {
	return &listener{c: c, table: t, log: log, kick: make(chan struct{}, 1),
		uris: map[string]struct{}{}, streams: map[uint64]uint64{}, ackCh: make(chan struct{})}
}

// listenStream is one open subscriptions/listen request.
type listenStream struct {
	id     uint64
	cancel context.CancelFunc
	done   chan struct{} // closed when the stream ended, whoever ended it
}

// run keeps a stream open until the connection or ctx ends. refresh fetches the
// backend's lists again, after a stream that broke.
func (l *listener) run(ctx context.Context, refresh func()) {
	bo := 100 * time.Millisecond
	var cur *listenStream
	defer func() {
		if cur != nil {
			l.close(cur)
		}
	}()
	broke := false
	for ctx.Err() == nil && !l.c.dead() {
		if cur == nil {
			cur = l.open(ctx)
			if broke {
				refresh()
			}
		}
		select {
		case <-l.kick:
			next := l.open(ctx)
			l.close(cur)
			cur = next
		case <-cur.done:
			l.forgetStream(cur.id)
			cur, broke = nil, true
			if !ctxtime.Sleep(ctx, bo) {
				return
			}
			bo = min(bo*2, 10*time.Second)
			continue
		case <-l.c.conn.Done():
			return
		case <-ctx.Done():
			return
		}
		bo = 100 * time.Millisecond
	}
}

// open sends a subscriptions/listen request with the current filter. The stream lives
// on a goroutine of its own: on HTTP, Send returns only when the stream ends.
func (l *listener) open(ctx context.Context) *listenStream {
	c := l.c
	e := &entry{kind: ownRequest, backend: c.b, conn: c, wait: make(chan []byte, 1)}
	l.table.add(e)
	l.mu.Lock()
	params := l.appendFilter(append([]byte(nil), `{"notifications":`...))
	l.streams[e.id] = l.ver
	l.mu.Unlock()
	params = append(params, '}')
	msg := codec.AppendRequest(nil, strconv.AppendUint(nil, e.id, 10), "subscriptions/listen", params)
	msg = c.withMeta(nil, msg, nil)
	sctx, cancel := context.WithCancel(ctx)
	s := &listenStream{id: e.id, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		if err := c.conn.Send(sctx, msg); err != nil {
			if sctx.Err() == nil {
				l.log.Debug("subscriptions/listen stream ended", "backend", c.b.cfg.Name, "err", err)
			}
			l.table.take(e.id, stateFailed)
			return
		}
		select {
		case <-e.wait: // the backend ended it (a response), or the connection was lost
		case <-sctx.Done():
			l.table.take(e.id, stateCancelled)
		}
	}()
	return s
}

// appendFilter appends the notifications filter object of the current URIs (under mu).
func (l *listener) appendFilter(dst []byte) []byte {
	dst = append(dst, `{"toolsListChanged":true,"promptsListChanged":true,"resourcesListChanged":true,"resourceSubscriptions":[`...)
	first := true
	for uri := range l.uris {
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = codec.AppendString(dst, uri)
	}
	return append(dst, "]}"...)
}

// close ends a stream: by closing it (its Send's context) where the transport cancels
// that way, with notifications/cancelled besides where it does not (stdio, NATS).
func (l *listener) close(s *listenStream) {
	s.cancel()
	l.forgetStream(s.id)
	if upstream.CancelsByClosing(l.c.conn) {
		return
	}
	params := append([]byte(`{"requestId":`), strconv.AppendUint(nil, s.id, 10)...)
	params = append(params, '}')
	note := codec.AppendNotification(nil, "notifications/cancelled", params)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = l.c.conn.Send(ctx, note)
}

func (l *listener) forgetStream(id uint64) {
	l.mu.Lock()
	delete(l.streams, id)
	l.mu.Unlock()
}

// changed tells run the filter changed.
func (l *listener) changed() {
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// errNotHonored: the backend acknowledged a stream without the URI asked for.
var errNotHonored = errors.New("the backend did not accept the subscription")

// add subscribes uri on the stream and waits (within ctx) until a stream that asks for
// it is acknowledged: nil when the backend honours it.
func (l *listener) add(ctx context.Context, uri string) error {
	l.mu.Lock()
	l.uris[uri] = struct{}{}
	l.ver++
	want := l.ver
	l.mu.Unlock()
	l.changed()
	for {
		l.mu.Lock()
		if l.ackVer >= want {
			_, ok := l.honored[uri]
			l.mu.Unlock()
			if !ok {
				return errNotHonored
			}
			return nil
		}
		ch := l.ackCh
		l.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-l.c.conn.Done():
			return errors.New("connection lost")
		}
	}
}

// remove drops uri from the stream's filter.
func (l *listener) remove(uri string) {
	l.mu.Lock()
	_, had := l.uris[uri]
	delete(l.uris, uri)
	l.ver++
	l.mu.Unlock()
	if had {
		l.changed()
	}
}

// acked takes a notifications/subscriptions/acknowledged: the stream it names (by
// subscriptionId, the id of its listen request) is live with the URIs listed.
func (l *listener) acked(params []byte) {
	raw, err := sonic.Get(params, "_meta", modern.KeySubscriptionID)
	if err != nil {
		return
	}
	idRaw, err := raw.Raw()
	if err != nil {
		return
	}
	id, ok := parseID([]byte(idRaw))
	if !ok {
		return
	}
	var f struct {
		Notifications struct {
			ResourceSubscriptions []string `json:"resourceSubscriptions"`
		} `json:"notifications"`
	}
	_ = sonic.Unmarshal(params, &f)
	l.mu.Lock()
	defer l.mu.Unlock()
	ver, ok := l.streams[id]
	if !ok || ver < l.ackVer {
		return // a stream already replaced
	}
	l.ackVer = ver
	l.honored = make(map[string]struct{}, len(f.Notifications.ResourceSubscriptions))
	for _, u := range f.Notifications.ResourceSubscriptions {
		l.honored[u] = struct{}{}
	}
	close(l.ackCh)
	l.ackCh = make(chan struct{})
}
