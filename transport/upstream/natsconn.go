package upstream

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/nats-io/nats.go"

	"github.com/mcprouter/mcprouter/codec"
)

// NATS header names (see transport.ServeNATS for the protocol).
const (
	natsSessionHeader = "Mcp-Session-Id"
	natsReplyHeader   = "Mcp-Reply-Subject"
	natsDirectHeader  = "Mcp-Direct"
)

// NATSOptions configures DialNATS.
type NATSOptions struct {
	// Name is the backend's name for logs and errors.
	Name   string
	Logger *slog.Logger
}

// NATSConn is one upstream session with a backend that joined NATS as a service. The
// session starts on the service's queue subject (any process) and then sticks to the
// process that answered, through its direct subject. If that process goes away the
// Conn dies (EventExpired) and the router opens a new session elsewhere.
type NATSConn struct {
	lifecycle
	nc      *nats.Conn
	name    string
	service string
	queue   string
	sid     string
	inbox   string
	sink    Sink
	sub     *nats.Subscription
	direct  atomic.Pointer[string]
	log     *slog.Logger
	version atomic.Pointer[string]

	mu      sync.Mutex
	answers map[string]string // the backend's request id -> the subject to answer on
}

// DialNATS opens a session with the NATS service named service.
func DialNATS(ctx context.Context, nc *nats.Conn, service string, opts NATSOptions, sink Sink) (*NATSConn, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Name == "" {
		opts.Name = service
	}
	var b [12]byte
	rand.Read(b[:])
	c := &NATSConn{
		nc: nc, name: opts.Name, service: service, queue: "mcp." + service, sid: hex.EncodeToString(b[:]),
		inbox: nc.NewRespInbox(), sink: sink, log: opts.Logger.With("backend", opts.Name),
		answers: map[string]string{},
	}
	c.lifecycle.init()
	sub, err := nc.Subscribe(c.inbox, c.fromBackend)
	if err != nil {
		return nil, err
	}
	c.sub = sub
	if err := nc.FlushWithContext(ctx); err != nil {
		sub.Unsubscribe()
		return nil, &dialError{err}
	}
	return c, nil
}

// fromBackend delivers what the backend publishes on its own.
func (c *NATSConn) fromBackend(m *nats.Msg) {
	var msg codec.Message
	if codec.Scan(m.Data, &msg) == nil && msg.Kind == codec.KindRequest {
		if d := m.Header.Get(natsDirectHeader); d != "" {
			c.mu.Lock()
			c.answers[string(msg.ID)] = d
			c.mu.Unlock()
		}
	}
	c.sink.Message(m.Data)
}

// Send implements Conn. A request waits for its answer within ctx and no longer than
// the Conn lives: Close fails it with ErrClosed (see request).
func (c *NATSConn) Send(ctx context.Context, msg []byte) error {
	if c.ctx.Err() != nil {
		return deadErr(c.Err())
	}
	var m codec.Message
	if err := codec.Scan(msg, &m); err != nil {
		return err
	}
	if m.Kind == codec.KindResult || m.Kind == codec.KindError {
		// An answer to the backend's request goes to the process that asked.
		c.mu.Lock()
		subj, ok := c.answers[string(m.ID)]
		delete(c.answers, string(m.ID))
		c.mu.Unlock()
		if ok {
			return c.nc.Publish(subj, msg)
		}
	}
	subj := c.queue
	if d := c.direct.Load(); d != nil {
		subj = *d
	}
	req := nats.NewMsg(subj)
	req.Header.Set(natsSessionHeader, c.sid)
	req.Header.Set(natsReplyHeader, c.inbox)
	if v := c.version.Load(); v != nil {
		req.Header.Set("MCP-Protocol-Version", *v)
	}
	req.Data = msg
	resp, err := c.request(ctx, req)
	if err != nil {
		if errors.Is(err, nats.ErrNoResponders) {
			if c.direct.Load() != nil {
				// The process holding our session is gone.
				c.expire()
				return fmt.Errorf("%w: %s: the service process holding the session is gone", ErrSessionExpired, c.name)
			}
			return fmt.Errorf("%w: no process of NATS service %s is running", ErrBackendDown, c.service)
		}
		return err
	}
	if d := resp.Header.Get(natsDirectHeader); d != "" && c.direct.Load() == nil {
		c.direct.Store(&d)
	}
	if len(resp.Data) > 0 {
		c.sink.Message(resp.Data)
	}
	return nil
}

// request sends req and waits for its reply within ctx and the Conn's life. NATS
// knows nothing of the Conn: without the Conn's end in the wait, a call in flight when
// the Conn closed waited for the backend's answer (a long tool call) or its own
// deadline, and was answered although its Conn was closed. A reply that comes once the
// Conn is dead is dropped, as an HTTPConn's is with its connection.
func (c *NATSConn) request(ctx context.Context, req *nats.Msg) (*nats.Msg, error) {
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(c.ctx, cancel)
	defer stop()
	resp, err := c.nc.RequestMsgWithContext(rctx, req)
	if c.ctx.Err() != nil {
		return nil, deadErr(c.Err())
	}
	return resp, err
}

func (c *NATSConn) expire() {
	if c.kill(ErrSessionExpired) {
		c.sink.Event(EventExpired, ErrSessionExpired)
		c.sub.Unsubscribe()
	}
}

// SetProtocolVersion implements Conn.
func (c *NATSConn) SetProtocolVersion(v string) { c.version.Store(&v) }

// Close implements Conn.
func (c *NATSConn) Close() error {
	if c.kill(ErrClosed) {
		c.sub.Unsubscribe()
	}
	return nil
}
