// Package tracing is mcprouter's OpenTelemetry tracing: a server span for each client
// request (started as the router takes it, ended when its answer goes out), a client
// span for the backend call it is forwarded as, and the W3C trace context passed on to
// the backend in HTTP headers and in params._meta (stdio backends: _meta only).
//
// Off by default. When off, nothing here runs: the router and the fleet see a nil
// *Tracer, read no header and parse no _meta. When on but a request is not sampled
// (and its client sent no trace context), the request costs one look for _meta and a
// draw: no span, no allocation, nothing passed on.
//
// Attributes follow the OpenTelemetry semantic conventions for MCP and JSON-RPC
// (mcp.method.name, mcp.session.id, mcp.resource.uri, mcp.protocol.version,
// jsonrpc.request.id, gen_ai.tool.name, gen_ai.prompt.name, rpc.response.status_code,
// error.type); the router's own are mcprouter.backend, mcprouter.instance and
// mcprouter.outcome.
package tracing

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
)

// Config is the tracing section of the configuration file. The standard OTEL_*
// environment variables fill in what it leaves unset (the exporters read their own:
// OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_HEADERS, OTEL_EXPORTER_OTLP_TIMEOUT...).
type Config struct {
	// Enabled turns tracing on. Default off; OTEL_TRACES_EXPORTER=otlp turns it on too,
	// and OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none keep it off whatever this
	// says.
	Enabled bool `yaml:"enabled"`
	// Exporter is otlp-http (OTLP protobuf over HTTP) or otlp-grpc. Default:
	// OTEL_EXPORTER_OTLP_TRACES_PROTOCOL or OTEL_EXPORTER_OTLP_PROTOCOL (grpc,
	// http/protobuf), else otlp-http.
	Exporter string `yaml:"exporter"`
	// Endpoint is the collector: a URL (http://collector:4318/v1/traces for HTTP,
	// http://collector:4317 for gRPC; the scheme says whether TLS is used) or host:port.
	// Default: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT, else
	// localhost:4318 (HTTP) or localhost:4317 (gRPC).
	Endpoint string `yaml:"endpoint"`
	// Insecure exports without TLS to a host:port Endpoint.
	Insecure bool `yaml:"insecure"`
	// SampleRatio is the fraction of new traces recorded, 0 to 1; a trace a client
	// continues keeps the client's decision (its sampled flag). Default:
	// OTEL_TRACES_SAMPLER (always_on, always_off, traceidratio, or their parentbased_
	// forms, which this is) with OTEL_TRACES_SAMPLER_ARG, else 1 (every trace).
	SampleRatio *float64 `yaml:"sample_ratio"`
	// Headers are sent with every export (a collector's API key). When set they replace
	// OTEL_EXPORTER_OTLP_HEADERS.
	Headers map[string]string `yaml:"headers"`
	// ServiceName is the service.name of the spans. Default: OTEL_SERVICE_NAME (or
	// service.name in OTEL_RESOURCE_ATTRIBUTES), else mcprouter.
	ServiceName string `yaml:"service_name"`
}

// Exporters.
const (
	ExporterHTTP = "otlp-http"
	ExporterGRPC = "otlp-grpc"
)

// Validate names the first bad key of c and why.
func (c *Config) Validate() error {
	switch c.Exporter {
	case "", ExporterHTTP, ExporterGRPC:
	default:
		return fmt.Errorf("tracing.exporter: %q is neither %s nor %s", c.Exporter, ExporterHTTP, ExporterGRPC)
	}
	if r := c.SampleRatio; r != nil && !(*r >= 0 && *r <= 1) {
		return fmt.Errorf("tracing.sample_ratio: %v is not between 0 and 1", *r)
	}
	if strings.Contains(c.Endpoint, "://") {
		u, err := url.Parse(c.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("tracing.endpoint: %q is not an http(s) URL", c.Endpoint)
		}
	}
	for k := range c.Headers {
		if k == "" || strings.ContainsAny(k, " \t\r\n:") {
			return fmt.Errorf("tracing.headers: %q is not a header name", k)
		}
	}
	return nil
}

// On reports whether tracing is to run: the configuration or OTEL_TRACES_EXPORTER asks
// for it, and neither OTEL_SDK_DISABLED nor OTEL_TRACES_EXPORTER=none forbids it.
func (c *Config) On() bool { return c.on(os.Getenv) }

func (c *Config) on(getenv func(string) string) bool {
	if disabled, _ := strconv.ParseBool(getenv("OTEL_SDK_DISABLED")); disabled {
		return false
	}
	switch strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")) {
	case "none":
		return false
	case "otlp":
		return true
	}
	return c.Enabled
}

// exporter is the exporter to use: the configured one, else the protocol the
// environment names.
func (c *Config) exporter(getenv func(string) string) (string, error) {
	if c.Exporter != "" {
		return c.Exporter, nil
	}
	proto := getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if proto == "" {
		proto = getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	switch proto {
	case "", "http/protobuf":
		return ExporterHTTP, nil
	case "grpc":
		return ExporterGRPC, nil
	}
	return "", errors.New("tracing: OTEL_EXPORTER_OTLP_PROTOCOL " + strconv.Quote(proto) + " is not supported (grpc or http/protobuf)")
}

// ratio is the fraction of new traces to record: SampleRatio, else the one
// OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG say, else 1. The router decides it
// itself, before any span exists, so that a request it does not record costs next to
// nothing; a client's sampled flag always decides for the trace it continues.
func (c *Config) ratio(getenv func(string) string) (float64, error) {
	if c.SampleRatio != nil {
		return *c.SampleRatio, nil
	}
	switch s := strings.TrimSpace(getenv("OTEL_TRACES_SAMPLER")); s {
	case "", "always_on", "parentbased_always_on":
		return 1, nil
	case "always_off", "parentbased_always_off":
		return 0, nil
	case "traceidratio", "parentbased_traceidratio":
		arg := strings.TrimSpace(getenv("OTEL_TRACES_SAMPLER_ARG"))
		if arg == "" {
			return 1, nil
		}
		r, err := strconv.ParseFloat(arg, 64)
		if err != nil || !(r >= 0 && r <= 1) {
			return 0, errors.New("tracing: OTEL_TRACES_SAMPLER_ARG " + strconv.Quote(arg) + " is not a ratio between 0 and 1")
		}
		return r, nil
	default:
		return 0, errors.New("tracing: OTEL_TRACES_SAMPLER " + strconv.Quote(s) + " is not supported (always_on, always_off, traceidratio, or parentbased_ of these)")
	}
}
