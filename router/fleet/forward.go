package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/bytedance/sonic"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/router"
	"github.com/mcprouter/mcprouter/transport"
	"github.com/mcprouter/mcprouter/transport/upstream"
)

// bufPool holds the buffers that forwarded messages are rewritten into.
var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

func getBuf() *[]byte { return bufPool.Get().(*[]byte) }

func putBuf(b *[]byte) {
	if cap(*b) > 64<<10 {
		return
	}
	*b = (*b)[:0]
	bufPool.Put(b)
}

var entryPool = sync.Pool{New: func() any { return new(entry) }}

// Prepare implements router.Fleet. It runs in the session's order: requests are routed
// and recorded in the in-flight table here, so that a cancellation that follows always
// finds them; the I/O happens in Run.
func (f *Fleet) Prepare(s *router.Session, x *transport.Exchange) bool {
	m := &x.Msg
	switch m.Kind {
	case codec.KindNotification:
		return f.clientNotification(s, x)
	case codec.KindResult, codec.KindError:
		return f.clientResponse(s, x)
	}
	cat := f.cat.Load()
	var b *backend
	strip := 0
	switch string(m.Method) {
	case "tools/list":
		return f.list(x, cat, kTools)
	case "prompts/list":
		return f.list(x, cat, kPrompts)
	case "resources/list":
		return f.list(x, cat, kResources)
	case "resources/templates/list":
		return f.list(x, cat, kTemplates)
	case "tools/call", "prompts/get":
		table, what := cat.tools, "tool"
		if string(m.Method) == "prompts/get" {
			table, what = cat.prompts, "prompt"
		}
		name := m.Name
		if m.Flags&codec.NameEscaped != 0 {
			// Rare: a name written with escapes. Decode it for the lookup; forward
			// rewrites the whole name then.
			name, _ = codec.Unquote(nil, m.Name)
		}
		r, ok := table[string(name)]
		if !ok {
			return f.replyErr(x, codec.CodeInvalidParams, "Unknown "+what+": "+string(name))
		}
		b, strip = r.b, r.strip
	case "resources/read", "resources/subscribe", "resources/unsubscribe":
		if b = cat.resourceOwner(string(m.URI)); b == nil {
			return f.replyErr(x, CodeResourceNotFound, "Resource not found: "+string(m.URI))
		}
		if string(m.Method) != "resources/read" && !b.cfg.PerClient {
			return f.subs.handle(s, x, b)
		}
	case "completion/complete":
		return f.complete(s, x, cat)
	default:
		return f.replyErr(x, codec.CodeMethodNotFound, "Method not found: "+string(m.Method))
	}
	f.track(s, x, b, strip)
	return true
}

// track records a request about to be forwarded to b.
func (f *Fleet) track(s *router.Session, x *transport.Exchange, b *backend, strip int) *entry {
	e := entryPool.Get().(*entry)
	*e = entry{kind: clientRequest, sess: s, x: x, backend: b, deadline: deadlineIn(b.cfg.Timeout), strip: strip}
	if tok := x.Msg.ProgressToken; tok != nil {
		e.progress = true
		e.origToken = tok
	}
	if f.obs != nil {
		e.start = router.Started(x) // before x.Tag changes hands
	}
	f.table.add(e)
	x.Tag = e
	return e
}

// Run implements router.Fleet: it sends the request to an instance of its backend.
func (f *Fleet) Run(s *router.Session, x *transport.Exchange) {
	switch t := x.Tag.(type) {
	case *entry:
		f.forward(t)
	case *serverRequest:
		f.answerBackend(x, t)
	case *subTask:
		f.subs.run(x, t)
	}
}

// forward sends a routed request: it finds the upstream session and a concurrency slot,
// builds the bytes while it still owns the exchange (the entry is routed: nobody else
// may complete it), then binds the entry (routed → sent) and sends. From the bind on, e
// and its exchange belong to whoever settles it: only id, deadline and the buffer are
// used after.
func (f *Fleet) forward(e *entry) {
	b := e.backend
	// The upstream session first: a request waiting for a per-client session (beyond
	// the cap) must not hold one of the backend's concurrency slots meanwhile.
	c, err := f.connFor(e)
	if err != nil {
		if errors.Is(err, errUpstreamFull) {
			f.abandon(e, codec.CodeOverloaded, f.upstreamFullMessage(b))
			return
		}
		f.abandon(e, CodeBackendUnavailable, "backend "+b.cfg.Name+" unavailable: "+err.Error())
		return
	}
	if !b.acquire(time.Second) {
		f.abandon(e, CodeBackendBusy, "backend "+b.cfg.Name+" is at its concurrency limit ("+strconv.Itoa(b.cfg.MaxConcurrency)+")")
		return
	}
	id, deadline := e.id, e.deadline
	bp := getBuf()
	*bp = appendWire((*bp)[:0], e)
	if f.obs != nil {
		e.sent = router.Now()
	}
	if !f.table.bind(e, c) { // cancelled before it left: nothing to tell the backend
		b.release()
		putBuf(bp)
		f.finishCancelled(e)
		return
	}
	f.Stats.Forwarded.Add(1)
	ctx, cancel := context.WithDeadline(f.ctx, time.Unix(0, deadline))
	err = c.conn.Send(ctx, *bp)
	if err != nil && errors.Is(err, upstream.ErrBackendDown) && !b.cfg.PerClient {
		// The instance refused the message (connection refused, process down, 502-504):
		// the backend did not process it, so another replica may, once.
		c.inst.healthy.Store(false)
		if in := b.pick(); in != nil && in != c.inst {
			if c2 := in.conn.Load(); c2 != nil && f.table.rebind(id, c, c2) {
				f.Stats.Failovers.Add(1)
				c = c2
				err = c.conn.Send(ctx, *bp)
			}
		}
	}
	cancel()
	putBuf(bp)
	if err != nil {
		f.sendFailed(b, c, id, err)
	}
}

// appendWire appends the bytes the backend sees for routed e: the client's request with
// the id (and progress token) replaced by e.id and the name's prefix removed.
func appendWire(dst []byte, e *entry) []byte {
	x := e.x
	var idb [20]byte
	wireID := strconv.AppendUint(idb[:0], e.id, 10)
	var sp [3]codec.Splice
	n := 0
	sp[n] = codec.Splice{Old: x.Msg.ID, New: wireID}
	n++
	if e.strip > 0 && x.Msg.Flags&codec.NameEscaped != 0 {
		// The raw prefix length differs from the decoded one: write the whole name anew.
		name, _ := codec.Unquote(nil, x.Msg.Name)
		if len(name) >= e.strip {
			enc := codec.AppendQuote(nil, name[e.strip:])
			sp[n] = codec.Splice{Old: x.Msg.Name, New: enc[1 : len(enc)-1]}
			n++
		}
	} else if e.strip > 0 && len(x.Msg.Name) >= e.strip {
		sp[n] = codec.Splice{Old: x.Msg.Name[:e.strip]}
		n++
	}
	if e.progress {
		sp[n] = codec.Splice{Old: x.Msg.ProgressToken, New: wireID}
		n++
	}
	return codec.AppendSplices(dst, x.Raw, sp[:n])
}

// sendFailed settles sent request id after its send failed, unless someone settled it
// first: a passed deadline is a timeout, counted like the sweeper's; anything else
// makes it unavailable.
func (f *Fleet) sendFailed(b *backend, c *upConn, id uint64, err error) {
	if errors.Is(err, context.DeadlineExceeded) {
		// The backend held the exchange past the deadline (HTTP answers within Send).
		if te := f.table.take(id, stateExpired); te != nil {
			f.Stats.TimedOut.Add(1)
			f.completeErrTaken(te, CodeBackendTimeout, timeoutMessage(b))
		}
		return
	}
	f.Stats.Failed.Add(1)
	if errors.Is(err, upstream.ErrBackendDown) || errors.Is(err, upstream.ErrClosed) {
		c.inst.healthy.Store(false)
	}
	if te := f.table.take(id, stateFailed); te != nil {
		f.completeErrTaken(te, CodeBackendUnavailable, "backend "+b.cfg.Name+": "+err.Error())
	}
}

// timeoutMessage is the error message of a request b did not answer in time.
func timeoutMessage(b *backend) string {
	return "backend " + b.cfg.Name + " did not answer within " + b.cfg.Timeout.String()
}

// abandon answers routed e with a router-made error: forward could not send it. A
// request cancelled meanwhile gets no answer, as cancellation asks.
func (f *Fleet) abandon(e *entry, code int, msg string) {
	if !f.table.abandon(e) {
		f.finishCancelled(e)
		return
	}
	f.completeErrTaken(e, code, msg)
}

// finishCancelled ends the exchange of a request settled as cancelled, without a
// response, and releases the entry.
func (f *Fleet) finishCancelled(e *entry) {
	f.Stats.Cancelled.Add(1)
	f.observe(e, router.OutcomeCancelled)
	if x := e.x; x != nil {
		e.x = nil
		x.Tag = nil
		x.Done()
	}
	f.release(e)
}

// connFor returns the upstream session to send e on: a healthy instance's shared
// session, or the client's own session with that instance (opened on first use).
func (f *Fleet) connFor(e *entry) (*upConn, error) {
	b := e.backend
	in := b.pick()
	if in == nil {
		return nil, errors.New("no healthy instance")
	}
	if !b.cfg.PerClient {
		if c := in.conn.Load(); c != nil {
			return c, nil
		}
		return nil, errors.New("instance " + in.dialer.Addr + " not connected")
	}
	st := f.state(e.sess)
	if st == nil {
		return nil, errSessionEnded
	}
	ctx, cancel := context.WithDeadline(f.ctx, time.Unix(0, e.deadline))
	defer cancel()
	return f.clientConn(ctx, st, in)
}

// clientConn returns the session's own upstream session with instance in, opening it
// on first use. One request of the session opens it while the session's others wait
// for it, so that a client never holds more than one slot of the cap per instance.
func (f *Fleet) clientConn(ctx context.Context, st *sessionState, in *instance) (*upConn, error) {
	for {
		st.mu.Lock()
		if st.closed {
			st.mu.Unlock()
			return nil, errSessionEnded
		}
		c := st.conns[in]
		if c != nil && c.dead() {
			delete(st.conns, in)
			go c.closeUpstream()
			c = nil
		}
		if c != nil {
			st.mu.Unlock()
			return c, nil
		}
		if opening := st.opening[in]; opening != nil {
			st.mu.Unlock()
			select {
			case <-opening: // opened or failed: look again
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		if st.opening == nil {
			st.opening = map[*instance]chan struct{}{}
		}
		opening := make(chan struct{})
		st.opening[in] = opening
		st.mu.Unlock()

		c, err := f.openClientConn(ctx, in, st)
		st.mu.Lock()
		delete(st.opening, in)
		close(opening)
		switch {
		case err != nil:
		case st.closed: // the client left while its session was opening
			go c.closeUpstream()
			c, err = nil, errSessionEnded
		default:
			if st.conns == nil {
				st.conns = map[*instance]*upConn{}
			}
			st.conns[in] = c
		}
		st.mu.Unlock()
		return c, err
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

func (f *Fleet) backendResponse(c *upConn, msg []byte, m *codec.Message) {
	id, ok := parseID(m.ID)
	if !ok {
		return
	}
	e := f.table.take(id, stateAnswered)
	if e == nil {
		return // settled already: timed out or cancelled
	}
	if e.kind == ownRequest {
		e.wait <- append([]byte(nil), msg...)
		return
	}
	if f.obs != nil {
		e.recv = router.Now()
	}
	outcome := router.OutcomeOK
	if m.Kind == codec.KindError {
		outcome = router.OutcomeError
	}
	bp := getBuf()
	*bp = codec.AppendReplaceID((*bp)[:0], msg, m, e.x.Msg.ID)
	f.finish(e, *bp, outcome)
	putBuf(bp)
}

// finish answers a taken entry's client and releases it.
func (f *Fleet) finish(e *entry, reply []byte, outcome router.Outcome) {
	f.observe(e, outcome)
	x := e.x
	e.x = nil
	if x != nil {
		x.Tag = nil
		x.Reply(reply)
	}
	f.release(e)
}

// release gives back what a settled client request held (a request that was sent
// holds a backend concurrency slot and counts as outstanding on its instance) and
// recycles it. The router's own requests hold neither and are not pooled.
func (f *Fleet) release(e *entry) {
	if e.kind != clientRequest {
		return
	}
	if e.conn != nil {
		e.backend.release()
		e.conn.inst.outstanding.Add(-1)
	}
	*e = entry{}
	entryPool.Put(e)
}

// completeErrTaken answers settled e with a router-made error: the client's request
// gets the error response, the router's own request learns that no answer will come.
func (f *Fleet) completeErrTaken(e *entry, code int, msg string) {
	if e.kind == ownRequest {
		close(e.wait)
		return
	}
	bp := getBuf()
	*bp = codec.AppendError((*bp)[:0], e.x.Msg.ID, code, msg, nil)
	f.finish(e, *bp, outcomeOfCode(code))
	putBuf(bp)
}

func (f *Fleet) replyErr(x *transport.Exchange, code int, msg string) bool {
	bp := getBuf()
	*bp = codec.AppendError((*bp)[:0], x.Msg.ID, code, msg, nil)
	f.observeLocal(x, router.OutcomeError)
	x.Reply(*bp)
	putBuf(bp)
	return false
}

func (f *Fleet) reply(x *transport.Exchange, result []byte) bool {
	bp := getBuf()
	*bp = codec.AppendResult((*bp)[:0], x.Msg.ID, result)
	f.observeLocal(x, router.OutcomeOK)
	x.Reply(*bp)
	putBuf(bp)
	return false
}

// list answers a */list request from the merged catalog.
func (f *Fleet) list(x *transport.Exchange, cat *catalog, k kind) bool {
	cursor := x.Msg.Cursor
	if x.Msg.Flags&codec.CursorEscaped != 0 {
		cursor, _ = codec.Unquote(nil, cursor)
	}
	bp := getBuf()
	res, err := cat.page((*bp)[:0], k, cursor, f.cfg.PageSize)
	if err != nil {
		putBuf(bp)
		return f.replyErr(x, codec.CodeInvalidParams, "Invalid params: invalid cursor")
	}
	*bp = res
	f.reply(x, res)
	putBuf(bp)
	return false
}

func (f *Fleet) backendNotification(c *upConn, msg []byte, m *codec.Message, reqID []byte) {
	switch string(m.Method) {
	case "notifications/progress":
		tok := progressToken(m)
		id, ok := parseID(tok)
		if !ok {
			return
		}
		bp := getBuf()
		f.table.with(id, func(e *entry) {
			if e.progress && e.x != nil {
				*bp = codec.AppendSplices((*bp)[:0], msg, []codec.Splice{{Old: tok, New: e.origToken}})
				e.x.Send(*bp)
			}
		})
		putBuf(bp)
	case "notifications/resources/updated":
		uri := string(m.URI)
		if m.Flags&codec.URIEscaped != 0 {
			if u, err := codec.Unquote(nil, m.URI); err == nil {
				uri = string(u)
			}
		}
		f.subs.updated(c.b, uri, msg)
	case "notifications/tools/list_changed", "notifications/prompts/list_changed", "notifications/resources/list_changed":
		f.wg.Add(1)
		go func() { defer f.wg.Done(); f.refresh(c.b, c) }()
		f.announceChange(c.b)
	case "notifications/cancelled":
		// The backend gave up one of its requests to a client.
		f.srv.cancelled(f, c, msg, m)
	default:
		// notifications/message (logging) and the rest go to the client the message
		// belongs to: the requester when known, the session owner in per-client mode.
		sent := false
		if id := f.relatedID(c, reqID); id != 0 {
			f.table.with(id, func(e *entry) {
				if e.x != nil {
					e.x.Send(msg)
					sent = true
				}
			})
		}
		if !sent && c.owner != nil && c.owner.Transport() != nil {
			c.owner.Transport().Send(msg)
		}
	}
}

// relatedID finds the in-flight request a backend message belongs to: the request on
// whose reply stream it came, else the only request in flight on the connection.
func (f *Fleet) relatedID(c *upConn, reqID []byte) uint64 {
	if reqID != nil {
		if id, ok := parseID(reqID); ok {
			return id
		}
	}
	return f.table.onConn(c)
}

// progressToken finds the token of a notifications/progress: the codec peeks
// params.progressToken for it.
func progressToken(m *codec.Message) []byte { return m.ProgressToken }

// clientNotification handles a notification from a client that concerns backends.
func (f *Fleet) clientNotification(s *router.Session, x *transport.Exchange) bool {
	switch string(x.Msg.Method) {
	case "notifications/cancelled":
		if e := f.table.takeClient(s, x.Msg.RequestID); e != nil {
			// The request reached the backend: tell it, then end the client's exchange
			// without a response, as cancellation asks.
			f.tellCancelled(e.conn, e.id)
			f.finishCancelled(e)
		}
	case "notifications/roots/list_changed":
		f.forEachSessionConn(s, func(c *upConn) {
			c.conn.Send(f.ctx, codec.AppendNotification(nil, "notifications/roots/list_changed", nil))
		})
	}
	x.Done()
	return false
}

// tellCancelled sends a backend notifications/cancelled for request id on c, in the
// background: the client does not wait for it.
func (f *Fleet) tellCancelled(c *upConn, id uint64) {
	params := append([]byte(`{"requestId":`), strconv.AppendUint(nil, id, 10)...)
	params = append(params, '}')
	note := codec.AppendNotification(nil, "notifications/cancelled", params)
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		ctx, cancel := context.WithTimeout(f.ctx, 5*time.Second)
		defer cancel()
		c.conn.Send(ctx, note)
	}()
}

// forEachSessionConn calls fn (in the background) for each per-client upstream session
// of s.
func (f *Fleet) forEachSessionConn(s *router.Session, fn func(*upConn)) {
	st := f.state(s)
	if st == nil {
		return
	}
	st.mu.Lock()
	var list []*upConn
	for _, c := range st.conns {
		list = append(list, c)
	}
	st.mu.Unlock()
	for _, c := range list {
		f.wg.Add(1)
		go func() { defer f.wg.Done(); fn(c) }()
	}
}

// complete routes completion/complete by its ref: a prompt by (exposed) name, a
// resource template by URI. The ref is rewritten with a real parse: completion is not a
// hot path, and the name sits two levels deep.
func (f *Fleet) complete(s *router.Session, x *transport.Exchange, cat *catalog) bool {
	var p map[string]json.RawMessage
	if err := sonic.Unmarshal(x.Msg.Params, &p); err != nil {
		return f.replyErr(x, codec.CodeInvalidParams, "Invalid params: completion/complete needs a ref")
	}
	var ref map[string]json.RawMessage
	if err := sonic.Unmarshal(p["ref"], &ref); err != nil {
		return f.replyErr(x, codec.CodeInvalidParams, "Invalid params: completion/complete needs a ref")
	}
	var typ, name, uri string
	sonic.Unmarshal(ref["type"], &typ)
	sonic.Unmarshal(ref["name"], &name)
	sonic.Unmarshal(ref["uri"], &uri)
	var b *backend
	switch typ {
	case "ref/prompt":
		r, ok := cat.prompts[name]
		if !ok {
			return f.replyErr(x, codec.CodeInvalidParams, "Unknown prompt: "+name)
		}
		b = r.b
		if r.strip > 0 {
			ref["name"], _ = sonic.Marshal(name[r.strip:])
		}
	case "ref/resource":
		if b = cat.resourceOwner(uri); b == nil {
			return f.replyErr(x, CodeResourceNotFound, "Resource not found: "+uri)
		}
	default:
		return f.replyErr(x, codec.CodeInvalidParams, "Invalid params: unknown ref type "+typ)
	}
	p["ref"], _ = sonic.Marshal(ref)
	params, _ := sonic.Marshal(p)
	// The rewritten request replaces the exchange's bytes: x.Raw is the exchange's own
	// copy, so it can be swapped for a new one.
	raw := codec.AppendRequest(nil, x.Msg.ID, "completion/complete", params)
	var m codec.Message
	if err := codec.Scan(raw, &m); err != nil {
		return f.replyErr(x, codec.CodeInternalError, "cannot rewrite completion request")
	}
	x.Raw, x.Msg = raw, m
	f.track(s, x, b, 0)
	return true
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

func sonicGetBool(obj []byte, path ...any) (bool, error) {
	n, err := sonic.Get(obj, path...)
	if err != nil {
		return false, err
	}
	return n.Bool()
}
