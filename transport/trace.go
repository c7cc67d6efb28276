package transport

import "github.com/valyala/fasthttp"

// TraceHeaders are the W3C Trace Context headers (traceparent, tracestate) and the W3C
// Baggage header of the HTTP request that carried a message: what a tracing handler
// continues when the message's own params._meta carries no trace context. The values
// are the raw header values, copied out of the request (the handler may read them after
// the transport has reused its buffers); nil when absent.
type TraceHeaders struct {
	Parent  []byte // traceparent
	State   []byte // tracestate
	Baggage []byte // baggage
	buf     []byte // the copies
}

// maxTraceHeader bounds each value kept: W3C Baggage allows 8192 bytes, a traceparent
// is 55, a tracestate at most 32 members of a few hundred bytes. The three copies thus
// stay well under maxPooledBuf, and their buffer is kept.
const maxTraceHeader = 8192

// take keeps the trace headers of h when on (HTTPConfig.TraceHeaders); off, it only
// forgets the previous request's, so that a server not asked for them reads nothing.
func (t *TraceHeaders) take(on bool, h *fasthttp.RequestHeader) {
	t.forget()
	if !on {
		return
	}
	t.buf = t.buf[:0]
	var ends [3]int
	vals := [3][]byte{h.Peek("traceparent"), h.Peek("tracestate"), h.Peek("baggage")}
	for i, v := range vals {
		if len(v) <= maxTraceHeader {
			t.buf = append(t.buf, v...)
		}
		ends[i] = len(t.buf)
	}
	view := func(from, to int) []byte {
		if from == to {
			return nil
		}
		return t.buf[from:to:to]
	}
	t.Parent, t.State, t.Baggage = view(0, ends[0]), view(ends[0], ends[1]), view(ends[1], ends[2])
}

// forget drops the values kept, keeping the buffer: a pooled holder carries nothing of
// the request it served before.
func (t *TraceHeaders) forget() { t.Parent, t.State, t.Baggage = nil, nil, nil }

// TraceHeaders returns the trace context headers of the HTTP POST that carried x
// (Streamable HTTP, or legacy HTTP+SSE), or nil when it came another way (stdio),
// carried neither a traceparent nor baggage, or the server does not read them
// (HTTPConfig.TraceHeaders). They are valid until Reply or Done.
func (x *Exchange) TraceHeaders() *TraceHeaders {
	if x.call == nil {
		return nil
	}
	var t *TraceHeaders
	switch o := x.call.out.(type) {
	case *httpPost:
		t = &o.trace
	case *unit:
		t = &o.trace
	default:
		return nil
	}
	if t.Parent == nil && t.Baggage == nil {
		return nil
	}
	return t
}
