package fleet

import (
	"errors"
	"strconv"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/transport/upstream"
)

// Sending a request again on another replica, as a careful gateway does (haproxy's
// retry-on conn-failure and empty-response, HTTP proxies' idempotency rules):
//
//   - the instance refused the message (upstream.ErrBackendDown: connection refused,
//     process down, 502-504): the backend did not process it, so any request may go to
//     another replica;
//   - the connection closed before any byte of the answer (upstream.ErrNoResponse: a
//     replica killed mid-request, its connections dropped): the backend may have run
//     it, so it goes to another replica only when running it twice does no harm: a
//     method that only reads (upstream.RetrySafe: resources/read, prompts/get,
//     completion/complete, ...), or a tools/call whose tool is annotated readOnlyHint
//     or idempotentHint (catalog_hints.go), and only while no message of the backend's
//     about it has come (entry.heard: its client may have heard of it).
//
// Once, never on a client's own upstream session (its state lives on that instance
// alone), and only to a replica of the same era (the bytes were built for it).

// resendBuilding finds where request id, whose send on c failed with err, goes next:
// the connection of another replica it was moved to, or nil and the error to answer
// with (err, saying why it was not sent again when the request may have run). build,
// when set, is called with the entry and the connection it moves to while it moves
// (under its shard's lock): the last moment its exchange may be read, to build the
// bytes sent again when the caller no longer has them.
func (fw *forwarder) resendBuilding(b *backend, c *upConn, id uint64, err error, build func(e *entry, to *upConn)) (*upConn, error) {
	// Lost before down: a request lost on a replica that died (failover's error wraps
	// the child's exit, a down error) was sent, and may have run.
	lost := errors.Is(err, upstream.ErrNoResponse)
	down := !lost && errors.Is(err, upstream.ErrBackendDown)
	if !down && !lost {
		return nil, err
	}
	if b.cfg.PerClient || c.owner != nil {
		return nil, mayHaveRun(err, lost, "the client's own upstream session lives on that instance")
	}
	if down {
		c.inst.healthy.Store(false)
	}
	var c2 *upConn
	if in := b.pickOther(c.inst); in != nil {
		if c2 = in.conn.Load(); c2 != nil && c2.modern != c.modern {
			c2 = nil
		}
	}
	if c2 == nil {
		return nil, mayHaveRun(err, lost, "no other replica is available")
	}
	why := ""
	if !fw.table.rebind(id, c, c2, func(e *entry) bool {
		if lost {
			why = fw.whyNotRepeat(e)
		}
		if why == "" && build != nil {
			build(e, c2)
		}
		return why == ""
	}) {
		if why == "" { // settled meanwhile: whoever did answered it
			return nil, err
		}
		return nil, mayHaveRun(err, lost, why)
	}
	fw.stats.Failovers.Add(1)
	return c2, nil
}

// whyNotRepeat says why sent request e, which the backend may have run, must not be
// run again; "" when it may. It reads e's exchange: call it under e's shard lock.
func (fw *forwarder) whyNotRepeat(e *entry) string {
	if e.heard {
		return "the backend had already sent messages about it"
	}
	m := &e.x.Msg
	if m.Flags&codec.MethodEscaped == 0 && string(m.Method) == "tools/call" {
		name := m.Name
		if m.Flags&codec.NameEscaped != 0 {
			name, _ = codec.Unquote(nil, m.Name)
		}
		if r, ok := fw.catalog.load().tools[string(name)]; ok && r.b == e.backend && r.repeatable {
			return ""
		}
		return "tool " + strconv.Quote(string(name)) + " is not annotated readOnlyHint or idempotentHint"
	}
	if upstream.RetrySafe(m) {
		return ""
	}
	return string(m.Method) + " is not known to be safe to repeat"
}

// pickOther picks a usable instance of b other than not, where a request that failed
// on not goes: pick's choice when it is another, else the first other usable one.
func (b *backend) pickOther(not *instance) *instance {
	if in := b.pick(); in != nil && in != not {
		return in
	}
	for _, in := range b.instances {
		if in != not && in.usable() {
			return in
		}
	}
	return nil
}

// notRepeated is the error of a request that may have run and was not sent again.
type notRepeated struct {
	err error
	why string
}

// mayHaveRun is err, saying why the request was not sent again when the backend may
// have run it (lost); err itself otherwise.
func mayHaveRun(err error, lost bool, why string) error {
	if !lost {
		return err
	}
	return &notRepeated{err: err, why: why}
}

func (e *notRepeated) Error() string {
	return "the request may have run: the connection closed before any byte of its answer, and it was not sent again (" +
		e.why + "): " + e.err.Error()
}

func (e *notRepeated) Unwrap() error { return e.err }
