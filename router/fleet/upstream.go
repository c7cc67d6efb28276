package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"

	"github.com/bytedance/sonic"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/router"
	"github.com/mcprouter/mcprouter/transport/upstream"
)

// One upstream session (upConn): the handshake, the router's own requests on it (call:
// initialize, lists, ping, setLevel, subscribe), and the Sink through which the
// backend's messages and connection events enter the fleet. Its methods run on the
// goroutine of whoever calls (call) or on the connection's reader goroutines (Message,
// Related, Event), which must not block: they dispatch and return.

// call sends one of the router's own requests on c and waits for its result (raw). A
// JSON-RPC error from the backend comes back as a *router.Error.
func (f *Fleet) call(ctx context.Context, c *upConn, method string, params []byte) ([]byte, error) {
	e := &entry{kind: ownRequest, backend: c.b, conn: c, wait: make(chan []byte, 1)}
	if dl, ok := ctx.Deadline(); ok {
		e.deadline = dl.UnixNano()
	}
	f.table.add(e)
	id := strconv.AppendUint(nil, e.id, 10)
	msg := codec.AppendRequest(nil, id, method, params)
	if err := c.conn.Send(ctx, msg); err != nil {
		f.table.take(e.id, stateFailed)
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
		f.table.take(e.id, stateExpired)
		return nil, ctx.Err()
	}
}

// upConn is one upstream session: a connection to one backend instance, initialized by the
// router. In shared mode it carries every client's requests to that instance; in
// per-client mode it belongs to one client session (owner).
type upConn struct {
	f     *Fleet
	b     *backend
	inst  *instance
	owner *router.Session // per-client mode only
	conn  upstream.Conn

	version string // negotiated with the backend
	killed  atomic.Bool
	// slot is true while a per-client session holds one of Fleet.upSlots.
	slot atomic.Bool
}

func (c *upConn) dead() bool {
	if c.killed.Load() {
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
// owner, when set, is the client whose capabilities and info are presented (per-client).
func (c *upConn) handshake(ctx context.Context, owner *router.Session) error {
	f := c.f
	params := append([]byte(nil), `{"protocolVersion":`...)
	params = codec.AppendString(params, router.Latest)
	params = append(params, `,"capabilities":`...)
	if owner != nil && len(owner.ClientCapabilities()) > 0 {
		params = append(params, owner.ClientCapabilities()...)
	} else {
		params = append(params, routerCaps...)
	}
	params = append(params, `,"clientInfo":{"name":`...)
	params = codec.AppendString(params, f.cfg.ClientName)
	params = append(params, `,"version":`...)
	params = codec.AppendString(params, f.cfg.ClientVersion)
	params = append(params, `}}`...)
	resp, err := f.call(ctx, c, "initialize", params)
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
	if s, ok := c.conn.(interface{ StartStream() }); ok {
		s.StartStream()
	}
	return nil
}

// Message receives everything the backend sends (upstream.Sink).
func (c *upConn) Message(msg []byte) { c.f.fromBackend(c, msg, nil) }

// Related receives a message that arrived on the reply stream of the request whose id
// (as the backend saw it) is reqID: it belongs to that request's client.
func (c *upConn) Related(reqID, msg []byte) { c.f.fromBackend(c, msg, reqID) }

// Event receives the connection's state changes (upstream.Sink).
func (c *upConn) Event(e upstream.Event, err error) {
	f := c.f
	switch e {
	case upstream.EventDown:
		f.log.Warn("backend instance down", "backend", c.b.cfg.Name, "instance", c.inst.dialer.Addr, "err", err)
		c.inst.healthy.Store(false)
		f.connLost(c, err)
	case upstream.EventRenewed:
		f.log.Info("backend session renewed after a restart", "backend", c.b.cfg.Name, "instance", c.inst.dialer.Addr)
		c.inst.healthy.Store(true)
		c.inst.Renewed.Add(1)
		f.sessionRenewed(c)
	case upstream.EventUp:
		// A new process without a recorded handshake: start over.
		c.kill()
	case upstream.EventExpired:
		c.inst.healthy.Store(false)
		f.connLost(c, err)
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
		f.backendResponse(c, msg, &m)
	case codec.KindNotification:
		f.backendNotification(c, msg, &m, reqID)
	case codec.KindRequest:
		f.backendRequest(c, msg, &m, reqID)
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
