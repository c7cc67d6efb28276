package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bytedance/sonic"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/router"
	"github.com/mcprouter/mcprouter/transport/upstream"
)

// One upstream session (upConn): how it is opened (connector: dial and handshake), the
// router's own requests on it (table.call: initialize, lists, ping, setLevel,
// subscribe), and the Sink through which the backend's messages and connection events
// enter the fleet (connEvents). Its methods run on the goroutine of whoever calls (open,
// call) or on the connection's reader goroutines (Message, Related, Event), which must
// not block: they dispatch and return.

// connEvents is what upstream sessions report to the fleet, on their connection's
// reader goroutines: the Fleet implements it and hands each to the part it concerns.
type connEvents interface {
	// fromBackend is one message from the backend; reqID, when known, is the id of the
	// request on whose reply stream it came.
	fromBackend(c *upConn, msg, reqID []byte)
	// connLost: the requests in flight on c will get no answer.
	connLost(c *upConn, cause error)
	// sessionRenewed: the backend restarted and c was re-established under a new
	// session, which lost what the backend kept for the old one.
	sessionRenewed(c *upConn)
}

// connector opens upstream sessions with backend instances: it dials, performs the
// handshake and wires the session's messages and events to the fleet. It is the one
// place an upstream session learns whom it speaks for: the router itself (shared
// sessions, owner nil) or one client session (per-client sessions, owner set by the
// sessions part), so that what the backend is shown of the client (capabilities today,
// credentials derived from the client's principal later) is decided here. Called by
// instances' maintainers and by requests opening a per-client session; it holds no
// state of its own.
type connector struct {
	table  *table
	events connEvents
	log    *slog.Logger
	// name and version are the clientInfo the router presents; info is the same as a
	// raw Implementation object, for the _meta of requests to 2026-07-28 backends.
	name, version string
	info          []byte
	// levels holds the log level each client session set (*router.Session → string),
	// sent in the _meta of its requests to 2026-07-28 backends.
	levels sync.Map
	// probe bounds the server/discover that finds an instance's era (twice the health
	// timeout): a 2025 stdio server may never answer a request sent before initialize.
	probe time.Duration
}

// open dials instance in and brings the connection into use in the instance's era
// (start: a session initialized, or none), for owner (nil: the router's shared
// connection).
func (k *connector) open(ctx context.Context, in *instance, owner *router.Session) (*upConn, error) {
	c := &upConn{via: k, b: in.b, inst: in, owner: owner}
	dctx := ctx
	if owner != nil {
		// A client's own upstream session carries the backend's credentials for that
		// client (RFC 8693 token exchange), never the router's own: the dialer asks.
		dctx = upstream.WithClient(ctx, owner.Principal())
	}
	conn, err := in.dialer.Dial(dctx, c)
	if err != nil {
		return nil, err
	}
	c.conn = conn
	err = k.start(ctx, c)
	if errors.Is(err, errRedial) {
		conn.Close()
		if conn, err = in.dialer.Dial(dctx, c); err != nil {
			return nil, err
		}
		c.conn = conn
		err = k.useLegacy(ctx, c)
	}
	if err != nil {
		c.conn.Close()
		return nil, err
	}
	return c, nil
}

// call sends one of the router's own requests on c and waits for its result (raw). A
// JSON-RPC error from the backend comes back as a *router.Error. The request is an entry
// of the in-flight table like a client's, so that the backend's answer, the sweeper and
// a lost connection settle it the same way.
func (t *table) call(ctx context.Context, c *upConn, method string, params []byte) ([]byte, error) {
	e := &entry{kind: ownRequest, backend: c.b, conn: c, wait: make(chan []byte, 1)}
	if dl, ok := ctx.Deadline(); ok {
		e.deadline = dl.UnixNano()
	}
	t.add(e)
	id := strconv.AppendUint(nil, e.id, 10)
	msg := codec.AppendRequest(nil, id, method, params)
	if c.modern {
		msg = c.withMeta(nil, msg, nil)
	}
	if err := c.conn.Send(ctx, msg); err != nil {
		t.take(e.id, stateFailed)
		return nil, err
	}
	select {
	case resp := <-e.wait:
		if resp == nil {
			return nil, errors.New("connection lost")
		}
		var m codec.Message
		if err := codec.Scan(resp, &m); err != nil {
			return nil, err
		}
		if m.Kind == codec.KindError {
			return nil, rpcErrorOf(m.Error)
		}
		return m.Result, nil
	case <-ctx.Done():
		t.take(e.id, stateExpired)
		return nil, ctx.Err()
	}
}

// upConn is one upstream session: a connection to one backend instance, initialized by the
// router. In shared mode it carries every client's requests to that instance; in
// per-client mode it belongs to one client session (owner). With a 2026-07-28 backend
// (modern) there is no session: the connection carries requests that each say who they
// are for in their _meta (era.go).
type upConn struct {
	via   *connector // what opened it, and where its messages go
	b     *backend
	inst  *instance
	owner *router.Session // per-client mode only
	// caps, when set, are the client capabilities this session declares, for the
	// 2026-07-28 clients that declared them (sessions_caps.go).
	caps []byte
	conn upstream.Conn
	// modern: the backend is used statelessly (2026-07-28); set before the connection
	// is published, read only after.
	modern bool
	// listen keeps the subscriptions/listen stream of a modern shared connection.
	listen *listener

	version string // negotiated with the backend
	killed  atomic.Bool
	// slot is true while a per-client session holds one of slots (sessions.slots).
	slot  atomic.Bool
	slots chan struct{}
}

func (c *upConn) dead() bool {
	if c.killed.Load() || c.outdated() {
		return true
	}
	select {
	case <-c.conn.Done():
		return true
	default:
		return false
	}
}

// kill marks the session dead and closes it; its maintainer reconnects.
func (c *upConn) kill() {
	if c.killed.CompareAndSwap(false, true) {
		go c.conn.Close()
	}
}

// routerCaps are the client capabilities the router declares to backends on shared
// sessions: everything it can route to some client. A request for a capability the
// causing client lacks is refused by the router with -32601.
const routerCaps = `{"roots":{"listChanged":true},"sampling":{},"elicitation":{}}`

// handshake initializes the upstream session: initialize, then notifications/initialized.
// c.caps, when set, are the capabilities presented (those a 2026-07-28 client
// declared: sessions_caps.go, and a principal's, sessions_principal.go); else c.owner's,
// when set (a 2025 client's own); else the router's.
func (k *connector) handshake(ctx context.Context, c *upConn) error {
	owner := c.owner
	params := append([]byte(nil), `{"protocolVersion":`...)
	params = codec.AppendString(params, router.Latest)
	params = append(params, `,"capabilities":`...)
	if c.caps != nil {
		params = append(params, c.caps...)
	} else if owner != nil && !owner.Stateless() && len(owner.ClientCapabilities()) > 0 {
		params = append(params, owner.ClientCapabilities()...)
	} else {
		params = append(params, routerCaps...)
	}
	params = append(params, `,"clientInfo":{"name":`...)
	params = codec.AppendString(params, k.name)
	params = append(params, `,"version":`...)
	params = codec.AppendString(params, k.version)
	params = append(params, `}}`...)
	resp, err := k.table.call(ctx, c, "initialize", params)
	if err != nil {
		return fmt.Errorf("initialize: %w", err)
	}
	var res struct {
		ProtocolVersion string          `json:"protocolVersion"`
		Capabilities    json.RawMessage `json:"capabilities"`
	}
	if err := sonic.Unmarshal(resp, &res); err != nil {
		return fmt.Errorf("initialize: bad result: %w", err)
	}
	c.version = res.ProtocolVersion
	c.conn.SetProtocolVersion(res.ProtocolVersion)
	c.b.mu.Lock()
	if c.b.caps == nil && len(res.Capabilities) > 0 {
		c.b.caps = append([]byte(nil), res.Capabilities...)
	}
	c.b.mu.Unlock()
	note := codec.AppendNotification(nil, "notifications/initialized", nil)
	if err := c.conn.Send(ctx, note); err != nil {
		return fmt.Errorf("notifications/initialized: %w", err)
	}
	// Streamable HTTP backends send their own notifications (list changes, resource
	// updates) on a GET stream, opened once the session exists.
	upstream.StartStream(c.conn)
	return nil
}

// Message receives everything the backend sends (upstream.Sink).
func (c *upConn) Message(msg []byte) { c.via.events.fromBackend(c, msg, nil) }

// Related receives a message that arrived on the reply stream of the request whose id
// (as the backend saw it) is reqID: it belongs to that request's client.
func (c *upConn) Related(reqID, msg []byte) { c.via.events.fromBackend(c, msg, reqID) }

// Event receives the connection's state changes (upstream.Sink).
func (c *upConn) Event(e upstream.Event, err error) {
	ev, log := c.via.events, c.via.log
	switch e {
	case upstream.EventDown:
		log.Warn("backend instance down", "backend", c.b.cfg.Name, "instance", c.inst.dialer.Addr, "err", err)
		c.inst.healthy.Store(false)
		ev.connLost(c, err)
	case upstream.EventRenewed:
		log.Info("backend session renewed after a restart", "backend", c.b.cfg.Name, "instance", c.inst.dialer.Addr)
		c.inst.healthy.Store(true)
		c.inst.Renewed.Add(1)
		ev.sessionRenewed(c)
	case upstream.EventUp:
		// A new process without a recorded handshake: start over.
		c.kill()
	case upstream.EventExpired:
		c.inst.healthy.Store(false)
		ev.connLost(c, err)
		c.kill()
	}
}

// fromBackend handles one message from a backend. reqID, when known, is the id of the
// request on whose reply stream the message came.
func (f *Fleet) fromBackend(c *upConn, msg, reqID []byte) {
	var m codec.Message
	if err := codec.Scan(msg, &m); err != nil {
		f.log.Warn("backend sent an invalid message", "backend", c.b.cfg.Name, "err", err)
		return
	}
	switch m.Kind {
	case codec.KindResult, codec.KindError:
		f.fwd.backendResponse(c, msg, &m)
	case codec.KindNotification:
		f.notices.fromBackend(c, msg, &m, reqID)
	case codec.KindRequest:
		f.srv.fromBackend(c, msg, &m, reqID)
	}
}

// rpcErrorOf turns a raw JSON-RPC error object into a *router.Error.
func rpcErrorOf(raw []byte) error {
	var e struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	}
	if err := sonic.Unmarshal(raw, &e); err != nil {
		return &router.Error{Code: codec.CodeInternalError, Message: "malformed error from backend"}
	}
	return &router.Error{Code: e.Code, Message: e.Message, Data: e.Data}
}
