package server

import (
	"bufio"
	"io"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/mcprouter/mcprouter/codec"
)

// The slow-bytes fault needs the wire itself: the transports write a message whole,
// so fault_slow_bytes is served in front of them. On HTTP, serveSlowHTTP answers the
// POST itself with a body it trickles; on stdio, the transport's writes to stdout go
// through a stdioWire that fault_slow_bytes can hold while it trickles its line, as a
// real process that writes slowly holds its stdout.

// stdioWire is stdout shared by the stdio transport and fault_slow_bytes: each Write
// (the transport writes whole lines) or trickled line holds it, so lines never mix.
type stdioWire struct {
	mu sync.Mutex
	w  io.Writer
}

func (w *stdioWire) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(p)
}

// slowAnswer is what fault_slow_bytes answers, before it is trickled.
func slowAnswer(id []byte) []byte {
	return codec.AppendResult(nil, id, []byte(`{"content":[{"type":"text","text":"written one byte at a time"}]}`))
}

// trickle writes b one byte at a time, every apart, flushing each; it stops early
// when the server closes or a write fails.
func (s *Server) trickle(w io.Writer, flush func() error, b []byte, every time.Duration) error {
	t := time.NewTimer(every)
	defer t.Stop()
	for i := range b {
		if _, err := w.Write(b[i : i+1]); err != nil {
			return err
		}
		if flush != nil {
			if err := flush(); err != nil {
				return err
			}
		}
		if every > 0 && i < len(b)-1 {
			t.Reset(every)
			select {
			case <-t.C:
			case <-s.stop:
				return io.ErrClosedPipe
			}
		}
	}
	return nil
}

// slowStdio plays fault_slow_bytes on stdio: the answer line is trickled on stdout,
// which no other message may use meanwhile, and the exchange ends without a reply of
// the transport's. Elsewhere (NATS) there is no wire to trickle on.
func (s *Server) slowStdio(m *codec.Message, sess *Session, r Responder, every time.Duration) {
	w := s.wire
	if w == nil {
		toolError(r, m.ID, "fault_slow_bytes is played on HTTP and stdio only")
		return
	}
	line := append(slowAnswer(m.ID), '\n')
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		w.mu.Lock()
		err := s.trickle(w.w, nil, line, every)
		w.mu.Unlock()
		if err != nil {
			s.log.Debug("fault_slow_bytes: trickle ended", "err", err)
		}
		r.Done()
	}()
}

// serveSlowHTTP answers a POST that calls fault_slow_bytes with a body trickled one
// byte at a time: JSON, or an SSE stream when the arguments say sse. It reports whether
// it answered. Sessions and headers are not checked: the backend is hostile anyway.
func (s *Server) serveSlowHTTP(ctx *fasthttp.RequestCtx) bool {
	if !ctx.IsPost() {
		return false
	}
	var m codec.Message
	if codec.Scan(ctx.PostBody(), &m) != nil || m.Kind != codec.KindRequest ||
		string(m.Method) != "tools/call" || string(m.Name) != "fault_slow_bytes" {
		return false
	}
	args := member(m.Params, "arguments")
	ms, ok := intArg(args, "msPerByte", defaultSlowMsPerByte)
	if !ok || ms < 0 || time.Duration(ms)*time.Millisecond > s.cfg.MaxSleep/100 {
		return false // Serve's tool answers the error
	}
	every := time.Duration(ms) * time.Millisecond
	body := slowAnswer(m.ID)
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.SetContentType("application/json")
	if sse, _ := boolArg(args, "sse"); sse {
		ctx.SetContentType("text/event-stream")
		body = append(append([]byte("event: message\ndata: "), body...), "\n\n"...)
	}
	ctx.SetBodyStreamWriter(func(w *bufio.Writer) {
		if err := s.trickle(w, w.Flush, body, every); err != nil {
			s.log.Debug("fault_slow_bytes: trickle ended", "err", err)
		}
	})
	return true
}
