package fleet

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/internal/testwait"
	"github.com/mcprouter/mcprouter/router"
	"github.com/mcprouter/mcprouter/transport/upstream"
)

// methodLog records the methods a fake backend was sent, in order.
type methodLog struct {
	mu      sync.Mutex
	methods []string
}

func (ml *methodLog) add(m string) {
	ml.mu.Lock()
	ml.methods = append(ml.methods, m)
	ml.mu.Unlock()
}

func (ml *methodLog) has(m string) bool {
	ml.mu.Lock()
	defer ml.mu.Unlock()
	return slices.Contains(ml.methods, m)
}

func (ml *methodLog) count(m string) int {
	ml.mu.Lock()
	defer ml.mu.Unlock()
	n := 0
	for _, v := range ml.methods {
		if v == m {
			n++
		}
	}
	return n
}

// loggedConn is a fakeConn that records each request's method.
type loggedConn struct {
	*fakeConn
	log *methodLog
}

func (c *loggedConn) Send(ctx context.Context, msg []byte) error {
	var m codec.Message
	if codec.Scan(msg, &m) == nil && m.Kind == codec.KindRequest {
		c.log.add(string(m.Method))
	}
	return c.fakeConn.Send(ctx, msg)
}

// TestListenPrincipal: a listen stream on a resource of a per-client 2025 backend
// subscribes on its principal's upstream session, again when the backend renewed that
// session, and the session is not reaped while the stream listens; the stream's end
// unsubscribes, and the idle session is then closed.
func TestListenPrincipal(t *testing.T) {
	f, fb := perClientFleet(t, 8, time.Minute)
	ml := &methodLog{}
	b := f.set.all()[0]
	d := fb.dialer()
	b.instances[0].dialer.Dial = func(ctx context.Context, sink upstream.Sink) (upstream.Conn, error) {
		c, err := d.Dial(ctx, sink)
		if err != nil {
			return nil, err
		}
		return &loggedConn{fakeConn: c.(*fakeConn), log: ml}, nil
	}
	b.caps = []byte(`{"resources":{"subscribe":true}}`)
	ss := f.sessions
	b.cfg.SessionIdle = 20 * time.Millisecond
	l := &clientListener{sess: new(router.Session)}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := ss.listenPrincipal(ctx, l, b, "memo://board"); err != nil {
		t.Fatal(err)
	}
	if n := ml.count("resources/subscribe"); n != 1 {
		t.Fatalf("%d resources/subscribe sent, want 1", n)
	}
	// The backend restarted and its session was renewed: the subscription is restored.
	c := ss.principalConnOf(t, principalID(l.sess), b)
	ss.restoreListens(c)
	if n := ml.count("resources/subscribe"); n != 2 {
		t.Fatalf("after the renewal: %d resources/subscribe sent, want 2", n)
	}
	// A listened principal is busy: however long unused, neither evicted nor reaped.
	p := &ss.principals
	p.mu.Lock()
	idlest := ss.idlest(time.Now().Add(time.Hour).UnixNano(), false)
	p.mu.Unlock()
	if idlest != nil {
		t.Fatal("the listened principal counts as idle")
	}
	ss.unlisten(l)
	testwait.For(t, "resources/unsubscribe sent", 20*time.Second, func() bool { return ml.has("resources/unsubscribe") })
	testwait.For(t, "the principal reaped once unlistened", 20*time.Second, func() bool { return ss.principalCount() == 0 && fb.open.Load() == 0 && ss.inUse() == 0 })
}

// principalConnOf returns principal id's open upstream session with b.
func (ss *sessions) principalConnOf(t *testing.T, id string, b *backend) *upConn {
	t.Helper()
	ss.principals.mu.Lock()
	ps := ss.principals.m[id]
	ss.principals.mu.Unlock()
	if ps == nil {
		t.Fatalf("no principal %q", id)
	}
	c := ps.st.conn(b.instances[0])
	if c == nil {
		t.Fatalf("principal %q has no upstream session with %s", id, b.cfg.Name)
	}
	return c
}
