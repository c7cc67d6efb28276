package tracing

import (
	"context"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/router"
	"github.com/mcprouter/mcprouter/transport"
)

// recorded is a Tracer whose spans land in an in-memory exporter, sampled at ratio.
func recorded(t *testing.T, ratio float64) (*Tracer, *tracetest.InMemoryExporter) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.AlwaysSample())))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	return newTracer(tp, ratio), exp
}

// exchange is a request exchange of raw, as a transport hands it over.
func exchange(t *testing.T, raw string) *transport.Exchange {
	x := &transport.Exchange{Raw: []byte(raw), Version: "2025-06-18"}
	if err := codec.Scan(x.Raw, &x.Msg); err != nil {
		t.Fatal(err)
	}
	return x
}

const clientParent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"

func attrs(kvs []attribute.KeyValue) map[attribute.Key]attribute.Value {
	m := make(map[attribute.Key]attribute.Value, len(kvs))
	for _, kv := range kvs {
		m[kv.Key] = kv.Value
	}
	return m
}

// A tools/call carrying a traceparent in _meta: the server span continues it, the
// backend call is its child, the backend is given the call's context in both places,
// and the error code answered is on both spans.
func TestRequestSpans(t *testing.T) {
	tr, exp := recorded(t, 1)
	x := exchange(t, `{"jsonrpc":"2.0","id":"7","method":"tools/call","params":{"name":"a__echo","arguments":{},"_meta":{"progressToken":3,"traceparent":"`+clientParent+`","tracestate":"congo=t61rcWkgMzE"}}}`)
	tr.Start(x)
	r, ok := x.Trace.(*Request)
	if !ok {
		t.Fatal("a sampled request has no trace")
	}
	headers, meta := r.Forward("a", "http://127.0.0.1:1/mcp")
	if !strings.Contains(string(headers), "tracestate: congo=t61rcWkgMzE\n") || !strings.HasPrefix(string(headers), "traceparent: 00-0af7651916cd43dd8448eb211c80319c-") {
		t.Errorf("headers %q", headers)
	}
	out := AppendMeta(nil, x.Raw, meta)
	var m codec.Message
	if err := codec.Scan(out, &m); err != nil {
		t.Fatalf("forwarded %s: %v", out, err)
	}
	got := string(codec.Member(codec.Member(m.Params, "_meta"), "traceparent"))
	if got == `"`+clientParent+`"` || !strings.Contains(got, "0af7651916cd43dd8448eb211c80319c") {
		t.Errorf("forwarded traceparent %s: want the call span's, in the client's trace", got)
	}
	if string(codec.Member(codec.Member(m.Params, "_meta"), "progressToken")) != "3" || m.Name == nil {
		t.Errorf("forwarded %s lost members", out)
	}
	r.Answered([]byte(`{"jsonrpc":"2.0","id":"7","error":{"code":-32602,"message":"bad"}}`))
	Observe(nil).RequestDone(x, 0, router.OutcomeError, 0, 1000)

	spans := exp.GetSpans()
	if len(spans) != 2 {
		t.Fatalf("%d spans, want 2", len(spans))
	}
	call, server := spans[0], spans[1]
	if server.Name != "tools/call a__echo" || call.Name != server.Name || server.SpanKind != trace.SpanKindServer || call.SpanKind != trace.SpanKindClient {
		t.Errorf("spans %q (%v), %q (%v)", server.Name, server.SpanKind, call.Name, call.SpanKind)
	}
	if server.Parent.TraceID().String() != "0af7651916cd43dd8448eb211c80319c" || server.Parent.SpanID().String() != "b7ad6b7169203331" {
		t.Errorf("server span's parent %v, want the client's", server.Parent)
	}
	if call.Parent.SpanID() != server.SpanContext.SpanID() {
		t.Error("the backend call is not the server span's child")
	}
	if !strings.Contains(got, call.SpanContext.SpanID().String()) {
		t.Errorf("forwarded traceparent %s is not the call span's %s", got, call.SpanContext.SpanID())
	}
	sa := attrs(server.Attributes)
	for k, want := range map[attribute.Key]string{
		"mcp.method.name": "tools/call", "gen_ai.tool.name": "a__echo", "jsonrpc.request.id": "7",
		"mcp.protocol.version": "2025-06-18", "mcprouter.backend": "a", "mcprouter.outcome": "error",
		"rpc.response.status_code": "-32602", "error.type": "-32602",
	} {
		if got := sa[k].Emit(); got != want {
			t.Errorf("server span %s = %q, want %q", k, got, want)
		}
	}
	ca := attrs(call.Attributes)
	if ca["mcprouter.instance"].AsString() != "http://127.0.0.1:1/mcp" || ca["rpc.jsonrpc.error_code"].AsInt64() != -32602 {
		t.Errorf("call span attributes %v", call.Attributes)
	}
}

// Unsampled: a request without a client's context gets no trace at all; one with a
// client's context from HTTP headers passes it on unchanged, in _meta too.
func TestRequestUnsampled(t *testing.T) {
	tr, exp := recorded(t, 0)
	x := exchange(t, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a__echo"}}`)
	tr.Start(x)
	if x.Trace != nil {
		t.Fatal("an unsampled request without a client's context has a trace")
	}
	unsampled := "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"
	x = exchange(t, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a__echo","_meta":{"traceparent":"`+unsampled+`"}}}`)
	tr.Start(x)
	r, ok := x.Trace.(*Request)
	if !ok {
		t.Fatal("a client's context is not kept to pass on")
	}
	headers, meta := r.Forward("a", "i")
	if string(headers) != "traceparent: "+unsampled+"\n" || meta != nil {
		t.Errorf("passed on %q, %q: want the client's header, _meta as it is", headers, meta)
	}
	Observe(nil).RequestDone(x, 0, router.OutcomeOK, 0, 0)
	if n := len(exp.GetSpans()); n != 0 {
		t.Errorf("%d spans exported, want none", n)
	}
}

func TestAppendMeta(t *testing.T) {
	fields := []byte(`"traceparent":"T"`)
	for _, c := range []struct{ in, want string }{
		{`{"jsonrpc":"2.0","id":1,"method":"ping"}`, `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"traceparent":"T"}}}`},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}`, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"traceparent":"T"},"name":"x"}}`},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{},"name":"x"}}`, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"traceparent":"T"},"name":"x"}}`},
		{`{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{"a":1,"trace\u0070arent":"old","baggage":"b=1", "z" : [1]}}}`, `{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{"traceparent":"T","a":1,"z":[1]}}}`},
		{`{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{"a":}}}`, `{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{"a":}}}`},
	} {
		if got := string(AppendMeta(nil, []byte(c.in), fields)); got != c.want {
			t.Errorf("AppendMeta(%s)\n got %s\nwant %s", c.in, got, c.want)
		}
	}
}

func TestConfig(t *testing.T) {
	env := func(kv ...string) func(string) string {
		return func(k string) string {
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1]
				}
			}
			return ""
		}
	}
	on := Config{Enabled: true}
	if !on.on(env()) || (&Config{}).on(env()) {
		t.Error("enabled does not decide alone")
	}
	if on.on(env("OTEL_SDK_DISABLED", "true")) || on.on(env("OTEL_TRACES_EXPORTER", "none")) || !(&Config{}).on(env("OTEL_TRACES_EXPORTER", "otlp")) {
		t.Error("the environment does not decide")
	}
	if k, _ := (&Config{}).exporter(env("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")); k != ExporterGRPC {
		t.Errorf("exporter %q from OTEL_EXPORTER_OTLP_PROTOCOL=grpc", k)
	}
	if _, err := (&Config{}).exporter(env("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")); err == nil {
		t.Error("http/json accepted")
	}
	for _, c := range []struct {
		env  []string
		want float64
	}{{nil, 1}, {[]string{"OTEL_TRACES_SAMPLER", "always_off"}, 0}, {[]string{"OTEL_TRACES_SAMPLER", "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG", "0.25"}, 0.25}} {
		if r, err := (&Config{}).ratio(env(c.env...)); err != nil || r != c.want {
			t.Errorf("ratio from %v: %v, %v; want %v", c.env, r, err, c.want)
		}
	}
	if _, err := (&Config{}).ratio(env("OTEL_TRACES_SAMPLER", "jaeger_remote")); err == nil {
		t.Error("an unsupported sampler accepted")
	}
	two := 2.0
	for _, bad := range []Config{{Exporter: "zipkin"}, {SampleRatio: &two}, {Endpoint: "ftp://x"}, {Headers: map[string]string{"a b": "c"}}} {
		if bad.Validate() == nil {
			t.Errorf("%+v validates", bad)
		}
	}
	good := Config{Exporter: ExporterGRPC, Endpoint: "http://127.0.0.1:4317", Headers: map[string]string{"api-key": "k"}}
	if err := good.Validate(); err != nil {
		t.Error(err)
	}
}

// TestOTLPOptions: the endpoint is a URL when it has a scheme, a host:port otherwise;
// insecure and headers are passed when set. Options are stood for by their text.
func TestOTLPOptions(t *testing.T) {
	name := func(kind string) func(string) string { return func(v string) string { return kind + " " + v } }
	insecure := func() string { return "insecure" }
	headers := func(h map[string]string) string { return "headers " + h["k"] }
	for _, c := range []struct {
		c    Config
		want string
	}{
		{Config{}, ""},
		{Config{Endpoint: "https://collector:4318/v1/traces"}, "url https://collector:4318/v1/traces"},
		{Config{Endpoint: "collector:4317", Insecure: true, Headers: map[string]string{"k": "v"}}, "host collector:4317|insecure|headers v"},
	} {
		if got := strings.Join(otlpOptions(&c.c, name("url"), name("host"), insecure, headers), "|"); got != c.want {
			t.Errorf("%+v: %q, want %q", c.c, got, c.want)
		}
	}
}
