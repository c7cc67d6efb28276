package transport

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/internal/ctxtime"
	"github.com/mcprouter/mcprouter/internal/defaults"
)

// StdioConfig configures the stdio server. Zero values take the defaults.
type StdioConfig struct {
	// MaxMessage bounds one incoming message (bytes); larger ones are answered with an
	// error and skipped. Default 4 MiB.
	MaxMessage int
	// MaxQueue bounds the bytes waiting to be written to stdout; a client that does not read
	// is cut off past it. Default 16 MiB.
	MaxQueue int
	// MaxBatch caps the elements of one batch. Default 256.
	MaxBatch int
	// Grace bounds how long replies to the messages already read are waited for when
	// the input ends or the context is done. Default 30s.
	Grace time.Duration
}

func (c *StdioConfig) defaults() {
	c.MaxMessage = defaults.Positive(c.MaxMessage, 4<<20)
	c.MaxQueue = defaults.Positive(c.MaxQueue, 16<<20)
	c.MaxBatch = defaults.Positive(c.MaxBatch, 256)
	c.Grace = defaults.Positive(c.Grace, stdioGrace)
}

// ErrStdioOverflow: the client stopped reading stdout and the outbound queue filled.
var ErrStdioOverflow = errors.New("transport: stdio client is not reading; output queue full")

// ServeStdio serves one client session on r (its stdin) and w (its stdout): newline-
// delimited JSON-RPC, as MCP's stdio transport defines it. It returns when r ends (the
// client closed stdin), when ctx is done, when the session is closed (a shutdown request,
// an overflow) or when writing fails; the session is closed then. When r ends or ctx is
// done, replies to the messages already read are written first, within cfg.Grace.
//
// r is read on a goroutine of its own, so that ctx and the end of the session are noticed
// while a read blocks (stdin of an idle client). If ServeStdio returns with a read in
// progress, that goroutine ends when the read does, and dispatches nothing more: close r
// to end it at once.
func ServeStdio(ctx context.Context, cfg StdioConfig, reg *Registry, h Handler, r io.Reader, w io.Writer) error {
	cfg.defaults()
	out := &stdioOut{w: w, max: cfg.MaxQueue, wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	sess, err := reg.create(CarrierStdio, "", nil, out)
	if err != nil {
		return err
	}
	go out.loop()
	defer func() {
		sess.Close()
		<-out.done
	}()

	stop := make(chan struct{}) // closed: the reader dispatches nothing more
	read := make(chan error, 1)
	go func() { read <- readStdio(cfg, sess, out, h, r, stop) }()
	select {
	case err := <-read:
		// Nothing accepted is lost: replies to what was read are written before the
		// session ends, within the grace period.
		ctxtime.Wait(out.pending.Zero(), cfg.Grace)
		if err == nil || errors.Is(err, io.EOF) {
			return out.failure()
		}
		return err
	case <-ctx.Done():
		close(stop)
		ctxtime.Wait(out.pending.Zero(), cfg.Grace)
		return ctx.Err()
	case <-sess.Done():
		close(stop)
		return nil
	case <-out.done:
		close(stop)
		return out.failure()
	}
}

// readStdio reads and dispatches messages until r ends (its error, io.EOF at the end),
// stop is closed or the output fails.
func readStdio(cfg StdioConfig, sess *Session, out *stdioOut, h Handler, r io.Reader, stop <-chan struct{}) error {
	dec := codec.NewDecoder(r, cfg.MaxMessage)
	var u *unit
	var errBuf, dataBuf []byte
	var inBatch int
	flush := func() { // the batch's closing bracket: its replies go out once all are done
		if u != nil {
			u.call.seal()
			u.call.unref()
			u, inBatch = nil, 0
		}
	}
	for {
		f, err := dec.Next()
		if err != nil {
			flush()
			return err
		}
		select {
		case <-stop:
			flush()
			return nil
		case <-out.done:
			flush()
			return nil
		default:
		}
		switch {
		case f.Err != nil:
			if u != nil && (f.InBatch || f.BatchEnd) {
				// An invalid element of a batch, or the batch broken off: the error joins
				// the batch's replies, and a broken batch ends here.
				u.handOne(h, f.Data, f.Err)
				if f.BatchEnd {
					flush()
				}
				continue
			}
			code, msg, data := errorParts(f.Err, dataBuf[:0])
			dataBuf = data
			errBuf = codec.AppendError(errBuf[:0], nil, code, msg, data)
			sess.Send(errBuf)
		case f.BatchEnd:
			flush()
		case f.InBatch:
			if u == nil {
				u = getUnit()
				u.sess, u.pending = sess, &out.pending
				out.pending.Add()
				u.begin(u, true)
			}
			// Elements are handed over as they come: a batch element runs before the
			// closing bracket arrives.
			if inBatch++; inBatch > cfg.MaxBatch {
				u.handOne(h, nil, &batchLimitError{max: cfg.MaxBatch})
			} else {
				u.handOne(h, f.Data, nil)
			}
		default:
			one := getUnit()
			one.sess, one.pending = sess, &out.pending
			out.pending.Add()
			one.in.elems = append(one.in.elems[:0], f.Data)
			one.in.scan()
			to := arrival{sess: sess, version: sess.Version(), carrier: CarrierStdio}
			statelessOnStdio(h, &one.in, &to)
			one.dispatch(one, h, to)
		}
	}
}

// statelessOnStdio marks a single message the handler claims as stateless (a revision
// without sessions, served per request on the stdio session's channel: no headers, no
// stream of its own).
func statelessOnStdio(h Handler, in *inbound, to *arrival) {
	sp, ok := h.(StatelessPolicy)
	if !ok || in.errs[0] != nil {
		return
	}
	m := &in.msgs[0]
	if (m.Kind == codec.KindRequest || m.Kind == codec.KindNotification) && sp.Stateless(m, nil) {
		to.stateless = &noHeaders
		to.screen, _ = h.(StatelessScreen)
	}
}

// noHeaders are the headers of a stateless message on a transport without any.
var noHeaders StatelessHeaders

// stdioGrace is the default of StdioConfig.Grace.
const stdioGrace = 30 * time.Second

// stdioOut writes a stdio session's messages, one per line, from its own goroutine so
// that no I/O happens under a lock and a slow reader stalls nobody.
type stdioOut struct {
	pending ctxtime.Counter // units whose replies are not all written yet
	w       io.Writer
	max     int
	mu      sync.Mutex
	buf     []byte
	wake    chan struct{}
	stop    chan struct{}
	done    chan struct{}
	err     error
	once    sync.Once
}

func (o *stdioOut) send(msg []byte) error {
	o.mu.Lock()
	if o.err != nil {
		err := o.err
		o.mu.Unlock()
		return err
	}
	if len(o.buf)+len(msg)+1 > o.max {
		o.err = ErrStdioOverflow
		o.mu.Unlock()
		o.close(0)
		return ErrStdioOverflow
	}
	o.buf = append(o.buf, msg...)
	o.buf = append(o.buf, '\n')
	o.mu.Unlock()
	select {
	case o.wake <- struct{}{}:
	default:
	}
	return nil
}

func (o *stdioOut) close(int) { o.once.Do(func() { close(o.stop) }) }

// failure is the error that ended the output, if any.
func (o *stdioOut) failure() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.err
}

func (o *stdioOut) attached() bool { return true }

func (o *stdioOut) loop() {
	defer close(o.done)
	var spare []byte
	for {
		stopping := false
		select {
		case <-o.wake:
		case <-o.stop:
			stopping = true
		}
		o.mu.Lock()
		out := o.buf
		o.buf = spare[:0]
		o.mu.Unlock()
		if len(out) > 0 {
			if _, err := o.w.Write(out); err != nil {
				o.mu.Lock()
				o.err = err
				o.mu.Unlock()
				return
			}
		}
		spare = out
		if stopping {
			// Write what arrived while we were writing, then end.
			o.mu.Lock()
			rest := o.buf
			o.buf = nil
			o.mu.Unlock()
			if len(rest) > 0 {
				o.w.Write(rest)
			}
			return
		}
	}
}
