package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"

	"github.com/bytedance/sonic"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/router"
	"github.com/mcprouter/mcprouter/transport/upstream"
)

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
