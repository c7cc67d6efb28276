package fleet

import (
	"encoding/hex"
	"log/slog"
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/mcprouter/mcprouter/transport/natsbus"
)

// changeBus is the part that tells the other router instances of a backend's list
// change and listens for theirs, over NATS (Config.Bus; without one it does nothing):
// instances without their own session to a backend, or that missed its notification,
// refresh too. Each instance tells its clients once: a refresh that finds nothing new
// says nothing. announce is called on a connection's reader goroutine; the listener
// runs on the NATS client's handler goroutine from Start until the fleet's lifecycle
// ends, and refreshes in the background.
type changeBus struct {
	bus     *natsbus.Bus // nil: a single instance, nothing to tell
	life    *lifecycle
	log     *slog.Logger
	set     *backendSet
	catalog *catalogBuilder
}

// announce tells the other router instances that b's lists changed.
func (cb *changeBus) announce(b *backend) {
	if cb.bus != nil {
		cb.bus.NC.Publish(cb.bus.Subject("changed", backendToken(b.cfg.Name)), nil)
	}
}

// listen refreshes a backend's catalog when another instance announces a change, until
// the fleet's lifecycle ends.
func (cb *changeBus) listen() {
	bus := cb.bus
	if bus == nil {
		return
	}
	sub, err := bus.NC.Subscribe(bus.Subject("changed", "*"), func(m *nats.Msg) {
		tok := m.Subject[strings.LastIndexByte(m.Subject, '.')+1:]
		b := cb.set.byToken(tok)
		if b == nil {
			return
		}
		in := b.pick()
		if in == nil {
			return
		}
		c := in.conn.Load()
		if c == nil {
			return
		}
		cb.life.spawn(func() { cb.catalog.refresh(b, c) })
	})
	if err != nil {
		cb.log.Warn("cannot listen for catalog changes on NATS", "err", err)
		return
	}
	go func() { <-cb.life.ctx.Done(); sub.Unsubscribe() }()
}

// backendToken is a backend name as one subject token.
func backendToken(name string) string { return hex.EncodeToString([]byte(name)) }
