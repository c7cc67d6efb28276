package tracing

import (
	"context"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/router"
	"github.com/mcprouter/mcprouter/router/modern"
	"github.com/mcprouter/mcprouter/transport"
	"github.com/mcprouter/mcprouter/transport/logsafe"
)

// The router's own attributes: which backend and instance took a request, and how it
// ended (router.Outcome: ok, error, timeout, overloaded, unavailable, cancelled).
const (
	BackendKey  = attribute.Key("mcprouter.backend")
	InstanceKey = attribute.Key("mcprouter.instance")
	OutcomeKey  = attribute.Key("mcprouter.outcome")
	// ErrorCodeKey is the JSON-RPC error code as a number, under the name of the
	// older JSON-RPC conventions, which trace viewers still show; the current ones say
	// it as the string rpc.response.status_code, set too.
	ErrorCodeKey = attribute.Key("rpc.jsonrpc.error_code")
)

// Request is the trace of one client request, in Exchange.Trace from the moment the
// router takes it (Tracer.Start) until its answer goes out (Observe's RequestDone): the
// server span, the client span of the backend call it was forwarded as (Forward), and
// the client's trace context as it came. A request neither recorded nor continuing a
// client's trace has none: Exchange.Trace stays nil.
//
// Its methods are called in order by whoever holds the request (the router, then the
// fleet's forwarder, then whoever settles it), never concurrently.
type Request struct {
	t      *Tracer
	ctx    context.Context // holds span
	span   trace.Span
	in     carrier // the client's trace context
	inMeta bool    // in came in params._meta: the forwarded bytes carry it already

	call      trace.Span // nil until forwarded (recorded requests only)
	callStart time.Time
	code      int // the JSON-RPC error code answered, when coded
	coded     bool
}

// Start begins the trace of request x as the router takes it: it continues the trace
// context of the request's params._meta or, failing that, of the HTTP request that
// carried it (the MCP conventions' order), and starts its server span. It implements
// the router's Config.Tracer. Notifications and responses are not traced.
func (t *Tracer) Start(x *transport.Exchange) {
	if x.Msg.Kind != codec.KindRequest {
		return
	}
	var in carrier
	inMeta := in.fromMeta(x.Msg.Params)
	if !inMeta {
		if h := x.TraceHeaders(); h != nil {
			in.fromHeaders(h.Parent, h.State, h.Baggage)
		}
	}
	if in.empty() && !t.sampleNew() {
		return // a new trace not to be recorded: no span, nothing to pass on
	}
	parent := context.Background()
	if !in.empty() {
		parent = t.extract(in)
	}
	method := router.MethodOf(x.Msg.Method)
	ctx, span := t.tr.Start(parent, method.String(), trace.WithSpanKind(trace.SpanKindServer))
	if !span.IsRecording() && in.empty() {
		return // nothing to record, nothing to pass on
	}
	r := &Request{t: t, ctx: ctx, span: span, in: in, inMeta: inMeta}
	if span.IsRecording() {
		r.describe(x, method)
	}
	t.active.Add()
	x.Trace = r
}

// extract is the context continuing in. in is a copy: only a request that continues a
// trace pays for the carrier escaping to the heap.
func (t *Tracer) extract(in carrier) context.Context {
	return t.prop.Extract(context.Background(), &in)
}

// describe names the server span {mcp.method.name} {target} and gives it the
// request's attributes, as the MCP conventions have them.
func (r *Request) describe(x *transport.Exchange, method router.Method) {
	name := string(x.Msg.Method)
	if method == router.MethodOther {
		name = "other" // a client's own method names stay out of span names
	}
	attrs := make([]attribute.KeyValue, 0, 8)
	attrs = append(attrs, semconv.McpMethodNameKey.String(string(x.Msg.Method)))
	if id := x.Msg.ID; len(id) > 0 {
		attrs = append(attrs, semconv.JSONRPCRequestID(unquoted(id)))
	}
	if x.Session != nil {
		// Hashed as in the logs: a session id is a credential where clients are not
		// authenticated.
		attrs = append(attrs, semconv.McpSessionID(logsafe.Session(x.Session.ID())))
	}
	if x.Version != "" {
		attrs = append(attrs, semconv.McpProtocolVersion(x.Version))
	}
	switch method {
	case router.MethodToolsCall:
		tool := contents(x.Msg.Name)
		name += " " + tool
		attrs = append(attrs, semconv.GenAIToolName(tool), semconv.GenAIOperationNameExecuteTool)
	case router.MethodPromptsGet:
		prompt := contents(x.Msg.Name)
		name += " " + prompt
		attrs = append(attrs, semconv.GenAIPromptName(prompt))
	case router.MethodResourcesRead, router.MethodResourcesSubscribe, router.MethodResourcesUnsubscribe:
		attrs = append(attrs, semconv.McpResourceURI(contents(x.Msg.URI)))
	}
	r.span.SetName(name)
	r.span.SetAttributes(attrs...)
}

// Forward starts the client span of the backend call r is forwarded as, to instance of
// backend, and returns the trace context the backend is to continue: headers, one
// "name: value\n" line each (upstream.WithTraceHeaders), and meta, the members for the
// forwarded request's params._meta (AppendMeta), nil when the bytes carry it already.
// A request that is not recorded passes its client's trace context on unchanged.
func (r *Request) Forward(backend, instance string) (headers, meta []byte) {
	c := r.in
	if r.span.IsRecording() {
		if r.call != nil { // sent again (another replica): one span per request
			r.call.SetAttributes(InstanceKey.String(instance))
		} else {
			r.span.SetAttributes(BackendKey.String(backend))
			var ctx context.Context
			ctx, r.call = r.t.tr.Start(r.ctx, spanName(r.span), trace.WithSpanKind(trace.SpanKindClient),
				trace.WithAttributes(BackendKey.String(backend), InstanceKey.String(instance)))
			r.callStart = time.Now()
			c = carrier{}
			r.t.prop.Inject(ctx, &c)
		}
	} else if r.inMeta {
		return c.appendHeaders(nil), nil
	}
	return c.appendHeaders(nil), c.appendFields(nil)
}

// EndRound ends the span of the backend call r was forwarded as, when the backend
// answered with an input_required result that the router takes up itself (a 2025
// client in front of a 2026-07-28 backend): the client's answers are gathered and the
// request is sent again, and the next Forward starts that round's span. Each round is
// one backend call span, child of the server span, with the same attributes.
func (r *Request) EndRound() {
	if r.call == nil {
		return
	}
	r.call.SetAttributes(OutcomeKey.String(router.OutcomeOK.String()))
	r.call.End()
	r.call = nil
}

// spanName is the name of s, the server span: the backend call is named alike. A
// recording span of the SDK is a ReadOnlySpan, which knows its name.
func spanName(s trace.Span) string {
	if ro, ok := s.(sdktrace.ReadOnlySpan); ok {
		return ro.Name()
	}
	return "mcp"
}

// Answered notes the answer the client gets (a result or an error), for its code.
func (r *Request) Answered(reply []byte) {
	if !r.span.IsRecording() {
		return
	}
	if e := codec.Member(reply, "error"); e != nil {
		r.code, r.coded = modern.ErrorCode(e), true
	}
}

// end ends r's spans: the request finished with o, backendNs after its backend call
// started (0: no call, or no answer).
func (r *Request) end(o router.Outcome, backendNs int64) {
	defer r.t.active.Done()
	if !r.span.IsRecording() {
		return
	}
	now := time.Now()
	attrs := make([]attribute.KeyValue, 0, 4)
	attrs = append(attrs, OutcomeKey.String(o.String()))
	errType := o.String()
	if r.coded {
		code := strconv.Itoa(r.code)
		attrs = append(attrs, semconv.RPCResponseStatusCode(code), ErrorCodeKey.Int(r.code))
		errType = code
	}
	failed := o != router.OutcomeOK || r.coded
	if failed {
		attrs = append(attrs, semconv.ErrorTypeKey.String(errType))
	}
	for _, s := range [2]trace.Span{r.call, r.span} {
		if s == nil {
			continue
		}
		s.SetAttributes(attrs...)
		if failed {
			s.SetStatus(codes.Error, errType)
		}
	}
	if r.call != nil {
		end := now
		if at := r.callStart.Add(time.Duration(backendNs)); backendNs > 0 && at.Before(now) {
			end = at
		}
		r.call.End(trace.WithTimestamp(end))
	}
	r.span.End(trace.WithTimestamp(now))
}

// Observe returns the router.Observer that ends the traces of finished requests, then
// hands each to next (nil: none). The router reports every client request to it.
func Observe(next router.Observer) router.Observer { return observer{next: next} }

type observer struct{ next router.Observer }

// FanOutDelivered implements router.Observer.
func (o observer) FanOutDelivered(ns int64) {
	if o.next != nil {
		o.next.FanOutDelivered(ns)
	}
}

// RequestDone implements router.Observer.
func (o observer) RequestDone(x *transport.Exchange, backend int, out router.Outcome, start, backendNs int64) {
	if r, ok := x.Trace.(*Request); ok {
		r.end(out, backendNs)
	}
	if o.next != nil {
		o.next.RequestDone(x, backend, out, start, backendNs)
	}
}

// contents decodes the contents of a JSON string (escapes and all).
func contents(raw []byte) string {
	s, err := codec.Unquote(nil, raw)
	if err != nil {
		return string(raw)
	}
	return string(s)
}

// unquoted is a raw JSON-RPC id as an attribute value: a string's contents, or the
// number as written.
func unquoted(id []byte) string {
	if len(id) >= 2 && id[0] == '"' {
		return contents(id[1 : len(id)-1])
	}
	return string(id)
}
