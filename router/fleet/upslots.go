package fleet

import (
	"context"
	"errors"
	"strconv"
	"time"
)

// Per-client upstream sessions (BackendConfig.PerClient) cost the backend a session
// each, and a stdio backend a child process each: the fleet holds at most
// Config.MaxUpstreamSessions of them at once. A client session that needs one beyond
// that waits its turn (first come, first served) for at most
// Config.UpstreamSessionWait, then gets an overload error. A slot is given back once
// the upstream session is closed (its child has exited), when its client session ends
// or when it is found dead.

// errUpstreamFull is returned by acquireUpstream when no slot freed up in time.
var errUpstreamFull = errors.New("too many upstream sessions")

// errSessionEnded is returned by connFor for a client session that ended meanwhile.
var errSessionEnded = errors.New("the client session ended")

// acquireUpstream takes a slot for one per-client upstream session, waiting at most
// Config.UpstreamSessionWait, until ctx ends or the client session ends (gone).
func (f *Fleet) acquireUpstream(ctx context.Context, gone <-chan struct{}) error {
	select {
	case f.upSlots <- struct{}{}:
		return nil
	default:
	}
	f.Stats.UpstreamQueued.Add(1)
	defer f.Stats.UpstreamQueued.Add(-1)
	t := time.NewTimer(f.cfg.UpstreamSessionWait)
	defer t.Stop()
	select {
	case f.upSlots <- struct{}{}:
		return nil
	case <-t.C:
		f.Stats.UpstreamRefused.Add(1)
		return errUpstreamFull
	case <-ctx.Done():
		return ctx.Err()
	case <-gone:
		return errSessionEnded
	}
}

// UpstreamSessions is the number of per-client upstream sessions open (or opening).
func (f *Fleet) UpstreamSessions() int { return len(f.upSlots) }

// upstreamFullMessage explains an errUpstreamFull to the client.
func (f *Fleet) upstreamFullMessage(b *backend) string {
	return "mcprouter: overloaded: backend " + b.cfg.Name + " needs a session of its own for this client, and all " +
		strconv.Itoa(f.cfg.MaxUpstreamSessions) + " per-client upstream sessions stayed busy for " + f.cfg.UpstreamSessionWait.String()
}

// closeUpstream closes a per-client upstream session and then gives its slot back
// (once, whoever calls it first).
func (c *upConn) closeUpstream() {
	c.conn.Close()
	if c.slot.CompareAndSwap(true, false) {
		<-c.f.upSlots
	}
}

// openClientConn opens the client's own upstream session with instance in, within a
// slot of the cap: it waits for one, dials and performs the handshake with the
// client's capabilities.
func (f *Fleet) openClientConn(ctx context.Context, in *instance, st *sessionState) (*upConn, error) {
	if err := f.acquireUpstream(ctx, st.done); err != nil {
		return nil, err
	}
	sess := st.sess
	c := &upConn{f: f, b: in.b, inst: in, owner: sess}
	conn, err := in.dialer.Dial(ctx, c)
	if err != nil {
		<-f.upSlots
		return nil, err
	}
	c.conn = conn
	c.slot.Store(true)
	if err := c.handshake(ctx, sess); err != nil {
		c.closeUpstream()
		return nil, err
	}
	return c, nil
}
