package tracing

import (
	"context"
	"math/rand/v2"
	"os"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcprouter/mcprouter/internal/ctxtime"
)

// Tracer makes the spans of one router. A nil *Tracer is tracing off; its methods are
// not to be called then (the router and the fleet check for nil once, not per call).
// It is safe for concurrent use.
type Tracer struct {
	tp   *sdktrace.TracerProvider
	tr   trace.Tracer
	prop propagation.TextMapPropagator
	// sample is the share of new traces recorded, out of 1<<63 (sampleNew); the SDK's
	// sampler then records every span it is asked for that a client did not mark
	// unsampled.
	sample uint64
	// active counts the requests holding a Request of this tracer (Start to end): a
	// tracer replaced by a reload is shut down once they ended (Idle).
	active ctxtime.Counter
}

// scope is the instrumentation scope the spans are reported under.
const scope = "github.com/mcprouter/mcprouter/tracing"

// New starts tracing as c and the environment say, exporting over OTLP in batches:
// nil (and no error) when tracing is off. version is the router's, for service.version.
// The exporter connects lazily: a collector that is down loses spans, never requests.
func New(ctx context.Context, c Config, version string) (*Tracer, error) {
	if !c.On() {
		return nil, nil
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	exp, err := newExporter(ctx, &c, os.Getenv)
	if err != nil {
		return nil, err
	}
	res, err := newResource(ctx, &c, version)
	if err != nil {
		return nil, err
	}
	ratio, err := c.ratio(os.Getenv)
	if err != nil {
		return nil, err
	}
	return newTracer(sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.AlwaysSample()))), ratio), nil
}

// NewFromProvider is the Tracer of provider tp, recording ratio (0 to 1) of the new
// traces: for a program that builds its own provider (another exporter, span
// processors of its own) and for tests. tp's sampler must record what it is asked to,
// as ParentBased(AlwaysSample()) does: the Tracer decides for new traces itself.
// Shutdown shuts tp down.
func NewFromProvider(tp *sdktrace.TracerProvider, ratio float64) *Tracer { return newTracer(tp, ratio) }

// newTracer is NewFromProvider.
func newTracer(tp *sdktrace.TracerProvider, ratio float64) *Tracer {
	return &Tracer{
		tp:     tp,
		tr:     tp.Tracer(scope),
		prop:   propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}),
		sample: uint64(max(0, min(ratio, 1)) * (1 << 63)),
	}
}

// sampleNew decides whether to record a new trace: a draw from the runtime's cheap
// per-thread generator, no lock and no span.
func (t *Tracer) sampleNew() bool {
	return t.sample == 1<<63 || rand.Uint64()>>1 < t.sample
}

// Shutdown exports the spans still queued (within ctx) and stops the exporter. Spans
// ended afterwards are dropped.
func (t *Tracer) Shutdown(ctx context.Context) error { return t.tp.Shutdown(ctx) }

// Active is the number of requests whose trace this tracer started and that have not
// ended yet: their spans end on it, so it must not be shut down before.
func (t *Tracer) Active() int { return t.active.N() }

// Idle returns a channel closed once no request holds a trace of this tracer (Active is
// 0): a tracer that a reload replaced is shut down then. A request that starts on the
// tracer after the channel closed is not waited for by it.
func (t *Tracer) Idle() <-chan struct{} { return t.active.Zero() }

// ForceFlush exports the spans ended so far, within ctx.
func (t *Tracer) ForceFlush(ctx context.Context) error { return t.tp.ForceFlush(ctx) }

// newExporter makes the OTLP exporter c names. What c leaves unset the exporter takes
// from the OTEL_EXPORTER_OTLP_* environment variables itself.
func newExporter(ctx context.Context, c *Config, getenv func(string) string) (sdktrace.SpanExporter, error) {
	kind, err := c.exporter(getenv)
	if err != nil {
		return nil, err
	}
	if kind == ExporterGRPC {
		return otlptracegrpc.New(ctx, otlpOptions(c, otlptracegrpc.WithEndpointURL, otlptracegrpc.WithEndpoint,
			otlptracegrpc.WithInsecure, otlptracegrpc.WithHeaders)...)
	}
	return otlptracehttp.New(ctx, otlpOptions(c, otlptracehttp.WithEndpointURL, otlptracehttp.WithEndpoint,
		otlptracehttp.WithInsecure, otlptracehttp.WithHeaders)...)
}

// otlpOptions turns c's endpoint, insecure and headers settings into one OTLP client's
// options. The gRPC and HTTP clients take the same settings, each as its own option
// type, so the rule (a "://" in the endpoint makes it a URL) is written once.
func otlpOptions[O any](c *Config, endpointURL, endpoint func(string) O, insecure func() O, headers func(map[string]string) O) []O {
	var opts []O
	switch {
	case strings.Contains(c.Endpoint, "://"):
		opts = append(opts, endpointURL(c.Endpoint))
	case c.Endpoint != "":
		opts = append(opts, endpoint(c.Endpoint))
	}
	if c.Insecure {
		opts = append(opts, insecure())
	}
	if len(c.Headers) > 0 {
		opts = append(opts, headers(c.Headers))
	}
	return opts
}

// newResource describes the router: service.name (the configured one, else the
// environment's, else mcprouter) and service.version, with OTEL_RESOURCE_ATTRIBUTES.
func newResource(ctx context.Context, c *Config, version string) (*resource.Resource, error) {
	attrs := []attribute.KeyValue{attribute.String("service.version", version)}
	if c.ServiceName == "" && os.Getenv("OTEL_SERVICE_NAME") == "" && !strings.Contains(os.Getenv("OTEL_RESOURCE_ATTRIBUTES"), "service.name=") {
		attrs = append(attrs, attribute.String("service.name", "mcprouter"))
	}
	opts := []resource.Option{resource.WithAttributes(attrs...), resource.WithFromEnv(), resource.WithHost(), resource.WithProcessPID()}
	if c.ServiceName != "" {
		opts = append(opts, resource.WithAttributes(attribute.String("service.name", c.ServiceName)))
	}
	return resource.New(ctx, opts...)
}
