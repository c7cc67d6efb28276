package transport

import (
	"sync"
)

// call gathers the replies to one inbound unit (a single message, or every element of a
// batch) and hands them to its output when the last exchange of the unit finishes.
//
// The JSON-RPC rule it implements: a batch gets one array of responses (in completion order,
// which JSON-RPC allows), a batch of notifications and responses only gets nothing, and a
// single request gets its single response.
//
// A held stream keeps its call for as long as it lasts (a subscriptions/listen stream,
// a session's whole life): the fields are ordered, and the counts 32 bits, so that a
// call fits the 112-byte size class (it took 144).
type call struct {
	mu      sync.Mutex
	out     output
	buf     []byte    // replies, concatenated
	ends    []int     // end offset of each reply in buf
	abandon Abandoner // Exchange.OnAbandon's, until the call finishes
	status  int       // Exchange.SetStatus's, 0 for none
	pending int32     // exchanges not yet finished
	refs    int32     // exchanges not yet released, plus one held by the transport
	batch   bool
	sealed  bool // the transport has handed over every exchange of the unit
	// streamed: the output took over delivery (SSE upgrade), replies go out one by one.
	streamed bool
	finished bool
	noEarly  bool // Exchange.HoldStream: no stream before the first message
}

// output is where a call's messages go; each client transport implements it.
type output interface {
	// finish delivers the collected replies once every exchange is done (replies may be
	// empty). Called with c.mu held: implementations must not block.
	finish(c *call)
	// related delivers a message that precedes the replies (progress, logging, a
	// server-to-client request). It may switch the call to streamed delivery by returning
	// true, after which every reply goes through streamed. Called with c.mu held.
	related(c *call, msg []byte) (streamed bool, err error)
	// streamed delivers one reply of a call in streamed mode; a call with msg nil and
	// last true ends the stream. Called with c.mu held.
	streamed(c *call, msg []byte, last bool)
	// bind creates a session for the call's transport.
	bind(c *call, version string, state SessionState) (*Session, error)
	// released is called when every exchange of the call has been released and the
	// transport is done with it: the output may recycle the call.
	released(c *call)
}

func (c *call) init(out output, batch bool) {
	c.out, c.batch = out, batch
	c.sealed, c.pending, c.refs = false, 0, 1
	c.buf, c.ends = c.buf[:0], c.ends[:0]
	c.streamed, c.finished = false, false
	c.abandon, c.status, c.noEarly = nil, 0, false
}

// add registers one more exchange on the call; the transport calls it before handing
// the exchange to the handler.
func (c *call) add(x *Exchange) {
	c.mu.Lock()
	x.call = c
	c.pending++
	c.refs++
	c.mu.Unlock()
}

// seal tells the call that the transport has handed over every exchange of the unit; if
// they are all done already, the call finishes now.
func (c *call) seal() {
	c.mu.Lock()
	c.sealed = true
	c.maybeFinishLocked()
	c.mu.Unlock()
}

// reply collects one exchange's reply (nil for none) and finishes the call when it was
// the last.
func (c *call) reply(msg []byte) {
	c.mu.Lock()
	c.pending--
	if msg != nil {
		if c.streamed {
			c.out.streamed(c, msg, false)
		} else {
			c.buf = append(c.buf, msg...)
			c.ends = append(c.ends, len(c.buf))
		}
	}
	c.maybeFinishLocked()
	c.mu.Unlock()
}

func (c *call) maybeFinishLocked() {
	if c.sealed && c.pending == 0 && !c.finished {
		c.finished = true
		if c.abandon != nil {
			c.settleAbandon()
		}
		c.abandon = nil
		if c.streamed {
			c.out.streamed(c, nil, true)
		} else {
			c.out.finish(c)
		}
	}
}

func (c *call) send(msg []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.finished {
		return nil
	}
	streamed, err := c.out.related(c, msg)
	if streamed && !c.streamed {
		c.streamed = true
		// Replies collected before the upgrade go out first, in the order they came.
		start := 0
		for _, end := range c.ends {
			c.out.streamed(c, c.buf[start:end], false)
			start = end
		}
		c.buf, c.ends = c.buf[:0], c.ends[:0]
	}
	return err
}

// onAbandon registers what to run if the client leaves before the call finishes.
func (c *call) onAbandon(a Abandoner) {
	c.mu.Lock()
	if !c.finished {
		c.abandon = a
	}
	c.mu.Unlock()
}

// takeAbandonLocked takes what to run now that the client left, nil when the call
// finished or nothing was registered. Called with c.mu held; the caller runs it after
// unlocking (it answers the exchange, which takes c.mu). The method value it makes is
// paid for only by a call that is abandoned.
func (c *call) takeAbandonLocked() func() {
	if c.finished || c.abandon == nil {
		return nil
	}
	a := c.abandon
	c.abandon = nil
	return a.Abandon
}

// settleAbandon tells a registered Abandoner that wants to know (UnusedAbandoner) that
// the call finished with its client there: Abandon will not run. Called with c.mu held.
func (c *call) settleAbandon() {
	if u, ok := c.abandon.(UnusedAbandoner); ok {
		u.Unused()
	}
}

// abandoned runs what was registered to run if the client left before the reply.
func (c *call) abandoned() {
	c.mu.Lock()
	fn := c.takeAbandonLocked()
	c.mu.Unlock()
	if fn != nil {
		fn()
	}
}

func (c *call) bind(version string, state SessionState) (*Session, error) {
	return c.out.bind(c, version, state)
}

func (c *call) unref() {
	c.mu.Lock()
	c.refs--
	done := c.refs == 0
	c.mu.Unlock()
	if done {
		c.out.released(c)
	}
}

// replies calls fn with each collected reply in order.
func (c *call) replies(fn func(msg []byte)) {
	start := 0
	for _, end := range c.ends {
		fn(c.buf[start:end])
		start = end
	}
}

// body is the body to send for the collected replies, as appendBody makes it, but with
// no copy for a single message: its reply itself, valid while c.mu is held and the call
// is not recycled; a batch's array is built in *tmp. For a sender that copies the body
// at once (fasthttp's SetBody), which saves a copy and, into a response's empty body, an
// allocation per call.
func (c *call) body(tmp *[]byte) []byte {
	if !c.batch {
		return c.buf
	}
	*tmp = c.appendBody((*tmp)[:0])
	return *tmp
}

// appendBody appends the collected replies as the body to send: the single reply for a
// single message, a JSON array for a batch, nothing when there is no reply.
func (c *call) appendBody(dst []byte) []byte {
	if len(c.ends) == 0 {
		return dst
	}
	if !c.batch {
		return append(dst, c.buf...)
	}
	dst = append(dst, '[')
	start := 0
	for i, end := range c.ends {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, c.buf[start:end]...)
		start = end
	}
	return append(dst, ']')
}
