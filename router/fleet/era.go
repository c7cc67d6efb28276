package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/bytedance/sonic"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/router"
	"github.com/mcprouter/mcprouter/router/modern"
	"github.com/mcprouter/mcprouter/transport/upstream"
)

// The era of a backend instance (2025: an initialized upstream session; 2026-07-28:
// none, every request saying who it is for in its _meta). The connector finds it when
// an instance's shared connection opens (start: server/discover first, initialize as
// the fall-back, or what BackendConfig.Era pins; unpinned, a dual-era backend keeps a
// session, see discovered), the instance keeps it (instance.era)
// for the per-client connections opened after, and it is checked again after the
// backend restarts: a 2025 session that a restarted backend renewed, whose health
// checks failed and then passed, or whose health check something refused, is probed
// with server/discover (recheck); a 2026
// instance's health check is server/discover itself (healthMethod, stillModern); and a
// connection lost for good is opened again, discovery included. A restart that no
// request, renewal or health check saw goes unnoticed until one does. A connection
// whose era its instance no longer has is dead (outdated) and is opened again.

// The values of instance.era.
const (
	eraUnknown uint32 = iota // its shared connection never opened
	eraLegacy
	eraModern
)

// start brings a freshly dialed connection into use: the instance's era for a
// connection that speaks for some clients only (scoped: a client's own, or one
// declaring the capabilities ctx names) when its shared one found it, else discovery
// per the pin.
func (k *connector) start(ctx context.Context, c *upConn) error {
	in := c.inst
	c.caps = declaredIn(ctx)
	if c.scoped() {
		switch in.era.Load() {
		case eraModern:
			return k.useModern(c, nil)
		case eraLegacy:
			return k.handshake(ctx, c)
		}
	}
	pin := in.b.cfg.Era
	if pin == Era2025 {
		return k.useLegacy(ctx, c)
	}
	d, err := k.discover(ctx, c, pin == Era2026)
	switch {
	case err == nil && (pin == Era2026 || !d.dualEra):
		return k.useModern(c, d.caps)
	case pin == Era2026:
		return fmt.Errorf("the backend is pinned to 2026-07-28 but server/discover failed: %w", err)
	case err == nil:
		k.log.Debug("dual-era backend: keeping a 2025 session", "backend", in.b.cfg.Name, "instance", in.dialer.Addr)
	default:
		k.log.Debug("backend does not speak 2026-07-28: initializing a session", "backend", in.b.cfg.Name, "instance", in.dialer.Addr, "discover", err)
	}
	if answered := err == nil || errors.Is(err, errNotModern); answered && probedInPlace(c.conn) {
		// The probe went over the connection itself (stdio, NATS: one stream per
		// server, no stateless view of it), and a server that answered it may count
		// the connection as begun: some then refuse initialize as a duplicate. The
		// session starts on a fresh connection.
		return errRedial
	}
	return k.useLegacy(ctx, c)
}

// errRedial asks open to dial the instance again and initialize a 2025 session there
// (start's probe answered on the connection itself).
var errRedial = errors.New("redial for a 2025 session")

// probedInPlace reports whether server/discover on conn went over conn itself.
func probedInPlace(conn upstream.Conn) bool {
	sc, ok := upstream.Stateless(conn)
	return ok && sc == conn
}

// useLegacy initializes a 2025 upstream session on c.
func (k *connector) useLegacy(ctx context.Context, c *upConn) error {
	if err := k.handshake(ctx, c); err != nil {
		return err
	}
	if !c.scoped() {
		c.inst.era.Store(eraLegacy)
	}
	return nil
}

// useModern makes c a stateless connection: requests go through the transport's
// 2026-07-28 form (upstream.Stateless) with their _meta, and nothing is initialized.
// caps, when known, are the backend's capabilities from server/discover.
func (k *connector) useModern(c *upConn, caps []byte) error {
	sc, ok := upstream.Stateless(c.conn)
	if !ok {
		return errNoStatelessTransport
	}
	c.conn, c.modern, c.version = sc, true, modern.Version
	if len(caps) > 0 {
		c.b.mu.Lock()
		if c.b.caps == nil {
			c.b.caps = append([]byte(nil), caps...)
		}
		c.b.mu.Unlock()
	}
	if !c.scoped() {
		c.inst.era.Store(eraModern)
		c.listen = newListener(c, k.table, k.log)
	}
	return nil
}

// errNoStatelessTransport: the legacy HTTP+SSE transport exists only in 2024-11-05.
var errNoStatelessTransport = errors.New("the legacy HTTP+SSE transport cannot carry 2026-07-28")

// errNotModern: the backend answered server/discover without offering 2026-07-28 (a
// 2025 server that knows the method).
var errNotModern = errors.New("server/discover does not offer " + modern.Version)

// discovered is what server/discover said of a backend that offers 2026-07-28.
type discovered struct {
	caps []byte // its capabilities, raw
	// dualEra: it offers a 2025 revision too. Unpinned, such a backend keeps a 2025
	// session: its tools that send server-to-client requests themselves (sampling,
	// elicitation, roots) work only in a session, and its input_required results reach
	// 2025 clients either way (reverse.go); pinned to 2026 it is used statelessly.
	dualEra bool
}

// discover sends server/discover to c's backend as a 2026-07-28 request and says what
// it offers when that revision is among it. c is left as it was: the probe
// goes on a stateless view of its transport. Unless pinned, the probe takes at most
// k.probe and half of ctx's time, so that a 2025 stdio server that never answers a
// request sent before initialize leaves time for the fall-back.
func (k *connector) discover(ctx context.Context, c *upConn, pinned bool) (discovered, error) {
	sc, ok := upstream.Stateless(c.conn)
	if !ok {
		return discovered{}, errNoStatelessTransport
	}
	if !pinned {
		d := k.probe
		if dl, has := ctx.Deadline(); has {
			d = min(d, time.Until(dl)/2)
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	probe := &upConn{via: k, b: c.b, inst: c.inst, owner: c.owner, conn: sc, modern: true}
	res, err := k.table.call(ctx, probe, "server/discover", nil)
	if err != nil {
		return discovered{}, err
	}
	return readDiscover(res)
}

// readDiscover reads a DiscoverResult that offers 2026-07-28.
func readDiscover(res []byte) (discovered, error) {
	var d struct {
		SupportedVersions []string        `json:"supportedVersions"`
		Capabilities      json.RawMessage `json:"capabilities"`
	}
	if err := sonic.Unmarshal(res, &d); err != nil {
		return discovered{}, fmt.Errorf("server/discover: bad result: %w", err)
	}
	if !slices.Contains(d.SupportedVersions, modern.Version) {
		return discovered{}, fmt.Errorf("%w (it offers %v)", errNotModern, d.SupportedVersions)
	}
	out := discovered{caps: d.Capabilities}
	for _, v := range d.SupportedVersions {
		out.dualEra = out.dualEra || !modern.IsModernVersion([]byte(v))
	}
	return out, nil
}

// recheck probes, after a restarted backend renewed c's 2025 session, whether it now
// speaks only 2026-07-28 (an upgrade behind the same address); if so c is closed and
// its maintainer connects again, statelessly. A pinned backend is not probed.
func (k *connector) recheck(ctx context.Context, c *upConn) {
	if c.modern || c.scoped() || c.b.cfg.Era != EraAuto {
		return
	}
	if d, err := k.discover(ctx, c, false); err != nil || d.dualEra {
		return
	}
	k.log.Info("backend speaks 2026-07-28 since its restart: reconnecting without a session", "backend", c.b.cfg.Name, "instance", c.inst.dialer.Addr)
	c.kill()
}

// healthMethod is the request that checks c's health: ping has no 2026-07-28
// counterpart, and server/discover tells, besides, that the era still holds.
func healthMethod(c *upConn) string {
	if c.modern {
		return "server/discover"
	}
	return "ping"
}

// stillModern judges a modern instance's health check: a backend that answers
// server/discover without 2026-07-28, or refuses it with a JSON-RPC error, was replaced
// by one of another era (unless pinned), so its connection is outdated.
func stillModern(c *upConn, res []byte, err error) bool {
	if !c.modern || c.b.cfg.Era == Era2026 {
		return true
	}
	if err == nil {
		d, derr := readDiscover(res)
		return derr == nil && !d.dualEra
	}
	var re *router.Error
	return !errors.As(err, &re)
}

// outdated reports a scoped connection opened in an era its instance left (the
// backend restarted as another one): it is closed and opened again.
func (c *upConn) outdated() bool {
	if !c.scoped() {
		return false
	}
	era := c.inst.era.Load()
	return era != eraUnknown && c.modern != (era == eraModern)
}

// withMeta appends msg, a request for c's 2026-07-28 backend, with its per-request
// _meta: the revision, the capabilities and clientInfo of whom c speaks for (the client
// of a per-client connection, the router itself otherwise) and, when sess (the client
// the request is for) set one with logging/setLevel, its log level. A request that
// carries a 2026-07-28 _meta of its own (a modern client's) passes as it is.
func (c *upConn) withMeta(dst, msg []byte, sess *router.Session) []byte {
	var m codec.Message
	if codec.Scan(msg, &m) != nil {
		return append(dst, msg...)
	}
	var meta modern.Meta
	modern.ReadMetaOf(&m, &meta)
	if meta.Version != nil {
		return append(dst, msg...)
	}
	caps, info := []byte(routerCaps), c.via.info
	if c.owner != nil && !c.owner.Stateless() { // a principal's: see sessions_principal.go
		if oc := c.owner.ClientCapabilities(); len(oc) > 0 {
			caps = oc
		}
		if oi := c.owner.ClientInfo(); len(oi) > 0 {
			info = oi
		}
	}
	fp := getBuf() // a pooled buffer: a stack array would escape through the encoders
	*fp = modern.AppendMetaFields((*fp)[:0], modern.Version, caps, info, c.via.level(sess))
	dst = modern.AppendWithMeta(dst, msg, &m, *fp)
	putBuf(fp)
	return dst
}

// setLevel records the log level a client session set (logging/setLevel): 2026-07-28
// has no such request, so the level travels in each of the session's requests.
func (k *connector) setLevel(s *router.Session, level string) { k.levels.Store(s, level) }

// forget drops an ended session's level.
func (k *connector) forget(s *router.Session) { k.levels.Delete(s) }

// level is the log level s set, "" when it set none (nil: the router's own request).
func (k *connector) level(s *router.Session) string {
	if s == nil {
		return ""
	}
	if v, ok := k.levels.Load(s); ok {
		return v.(string)
	}
	return ""
}

// modern reports whether b is used statelessly: one of its instances found 2026-07-28.
func (b *backend) modern() bool {
	for _, in := range b.instances {
		if in.era.Load() == eraModern {
			return true
		}
	}
	return false
}

// Native implements router.NativeFleet: every backend is spoken to statelessly
// (2026-07-28) over shared connections, so a stateless client's requests need no
// translation. An instance not connected yet counts by its backend's others; a backend
// with none connected is not native.
func (f *Fleet) Native() bool {
	for _, b := range f.set.all() {
		if b.cfg.PerClient || !b.modern() {
			return false
		}
	}
	return true
}
