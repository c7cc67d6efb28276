package fleet

import (
	"context"

	"github.com/mcprouter/mcprouter/tracing"
	"github.com/mcprouter/mcprouter/transport"
	"github.com/mcprouter/mcprouter/transport/upstream"
)

// traced starts the span of the backend call traced request tr is forwarded as on c,
// and gives the backend the trace context to continue in both places it may look: the
// forwarded bytes' params._meta (*bp is rewritten; stdio and NATS backends have only
// this) and, for HTTP backends, the headers of the returned context. A request the
// router does not trace has no tr: forward never gets here, and no _meta is parsed.
func traced(ctx context.Context, tr *tracing.Request, c *upConn, bp *[]byte) context.Context {
	headers, meta := tr.Forward(c.b.cfg.Name, c.inst.dialer.Addr)
	if meta != nil {
		mp := getBuf()
		*mp = tracing.AppendMeta((*mp)[:0], *bp, meta)
		*bp, *mp = *mp, *bp
		putBuf(mp)
	}
	return upstream.WithTraceHeaders(ctx, headers)
}

// endRound ends the backend call span of traced request x (if it is traced) when the
// backend answered input_required and the router gathers the answers itself
// (reverse.go): the retry is another backend call, with a span of its own.
func endRound(x *transport.Exchange) {
	if tr, ok := x.Trace.(*tracing.Request); ok {
		tr.EndRound()
	}
}
