package app_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	collpb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/mcprouter/mcprouter/cmd/mcpbackend/mcpbackendtest"
	"github.com/mcprouter/mcprouter/cmd/mcpbackend/server"
	"github.com/mcprouter/mcprouter/cmd/mcprouter/app"
	"github.com/mcprouter/mcprouter/internal/mcpraw"
	"github.com/mcprouter/mcprouter/internal/testio"
)

// otlpReceiver is an OTLP/HTTP trace receiver on loopback: it decodes every
// ExportTraceServiceRequest (protobuf) the router exports and keeps its spans.
type otlpReceiver struct {
	mu    sync.Mutex
	spans []*tracepb.Span
	url   string
}

func startReceiver(t *testing.T) *otlpReceiver {
	r := &otlpReceiver{}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(io.LimitReader(req.Body, 16<<20))
		var ex collpb.ExportTraceServiceRequest
		if req.URL.Path != "/v1/traces" || err != nil || proto.Unmarshal(body, &ex) != nil {
			http.Error(w, "not an OTLP trace export", http.StatusBadRequest)
			return
		}
		r.add(&ex)
		resp, _ := proto.Marshal(&collpb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(resp)
	}))
	t.Cleanup(ts.Close)
	r.url = ts.URL + "/v1/traces"
	return r
}

// add keeps the spans of an export.
func (r *otlpReceiver) add(ex *collpb.ExportTraceServiceRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range ex.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			r.spans = append(r.spans, ss.Spans...)
		}
	}
}

// grpcTraces is the OTLP/gRPC trace service of an otlpReceiver.
type grpcTraces struct {
	collpb.UnimplementedTraceServiceServer
	r *otlpReceiver
}

func (g grpcTraces) Export(_ context.Context, ex *collpb.ExportTraceServiceRequest) (*collpb.ExportTraceServiceResponse, error) {
	g.r.add(ex)
	return &collpb.ExportTraceServiceResponse{}, nil
}

// startGRPCReceiver is startReceiver speaking OTLP/gRPC; its url is host:port.
func startGRPCReceiver(t *testing.T) *otlpReceiver {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &otlpReceiver{url: ln.Addr().String()}
	srv := grpc.NewServer()
	collpb.RegisterTraceServiceServer(srv, grpcTraces{r: r})
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)
	return r
}

// trace returns the spans of trace id (hex).
func (r *otlpReceiver) trace(id string) []*tracepb.Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*tracepb.Span
	for _, s := range r.spans {
		if hex.EncodeToString(s.TraceId) == id {
			out = append(out, s)
		}
	}
	return out
}

// serverAndCall picks, among the spans of one trace, the router's server span and its
// backend call (client) span; either is nil when the trace has none.
func serverAndCall(spans []*tracepb.Span) (srv, call *tracepb.Span) {
	for _, s := range spans {
		switch s.Kind {
		case tracepb.Span_SPAN_KIND_SERVER:
			srv = s
		case tracepb.Span_SPAN_KIND_CLIENT:
			call = s
		}
	}
	return srv, call
}

// clearOTelEnv clears, for the test, the OTEL_* variables that would turn the SDK
// off or send the spans elsewhere than the configuration says.
func clearOTelEnv(t *testing.T) {
	for _, k := range []string{"OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_TRACES_SAMPLER", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		t.Setenv(k, "")
	}
}

// has reports whether a server span named name arrived.
func (r *otlpReceiver) has(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.spans {
		if s.Name == name && s.Kind == tracepb.Span_SPAN_KIND_SERVER {
			return true
		}
	}
	return false
}

// backendSaw is what a backend received with each tools/call: the traceparent header
// and params._meta.traceparent.
type backendSaw struct {
	mu    sync.Mutex
	calls []struct{ header, meta string }
}

func (b *backendSaw) all() []struct{ header, meta string } {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append(b.calls[:0:0], b.calls...)
}

// startSeenBackend starts the reference backend (mcpbackend, over HTTP) behind a
// loopback reverse proxy that records the trace context of every tools/call it
// passes on; it returns the proxy's MCP URL.
func startSeenBackend(t *testing.T) (string, *backendSaw) {
	s := mcpbackendtest.Start(t, server.Config{Tick: -1})
	saw := &backendSaw{}
	return testio.Tap(t, s.URL(), func(r *http.Request, body []byte) {
		var m struct {
			Method string `json:"method"`
			Params struct {
				Meta struct {
					Traceparent string `json:"traceparent"`
				} `json:"_meta"`
			} `json:"params"`
		}
		if json.Unmarshal(body, &m) == nil && m.Method == "tools/call" {
			saw.mu.Lock()
			saw.calls = append(saw.calls, struct{ header, meta string }{r.Header.Get("traceparent"), m.Params.Meta.Traceparent})
			saw.mu.Unlock()
		}
	}), saw
}

// rawClient speaks Streamable HTTP to the router as a 2025-06-18 session, sending the
// headers each post is given.
type rawClient struct {
	t *testing.T
	c mcpraw.Client
}

// newRawClient opens a session on url.
func newRawClient(t *testing.T, url string) *rawClient {
	t.Helper()
	c := &rawClient{t: t, c: mcpraw.Client{URL: url, Version: "2025-06-18", HTTP: &http.Client{Timeout: 30 * time.Second}}}
	if r, err := c.c.Initialize(t.Context(), ""); err != nil || c.c.Session == "" {
		t.Fatalf("initialize: %v %v", err, r)
	}
	return c
}

// post sends body with extra headers (name, value, ...) and returns the JSON-RPC
// response (a JSON body, or the last message of an SSE one).
func (c *rawClient) post(body string, headers ...string) map[string]json.RawMessage {
	c.t.Helper()
	c.c.Header = http.Header{}
	for i := 0; i+1 < len(headers); i += 2 {
		c.c.Header.Set(headers[i], headers[i+1])
	}
	r, err := c.c.Post(c.t.Context(), body)
	if err != nil {
		c.t.Fatal(err)
	}
	msgs := r.Messages()
	var out map[string]json.RawMessage
	if len(msgs) == 0 || json.Unmarshal(msgs[len(msgs)-1], &out) != nil {
		c.t.Fatalf("no JSON-RPC response: %v", r)
	}
	return out
}

// attr is the value of attribute key of s, as text ("" when absent).
func attr(s *tracepb.Span, key string) string {
	for _, kv := range s.Attributes {
		if kv.Key != key {
			continue
		}
		if _, isInt := kv.Value.GetValue().(*commonpb.AnyValue_IntValue); isInt {
			return fmt.Sprint(kv.Value.GetIntValue())
		}
		return kv.Value.GetStringValue()
	}
	return ""
}

// TestTracingEndToEnd: a real router with tracing on, in front of the reference
// backend over HTTP, exports to an OTLP receiver on loopback. A tools/call continuing a
// client's trace (from the traceparent header, then from params._meta) gives a server
// span, child of the client's, with a backend call span as its child; the backend
// receives the call span's context in its headers and in _meta; a JSON-RPC error's code
// is on the spans; a request the router answers itself (initialize) has its span too.
// The spans go over OTLP/HTTP, then over OTLP/gRPC.
func TestTracingEndToEnd(t *testing.T) {
	clearOTelEnv(t)
	t.Run("otlp-http", func(t *testing.T) {
		recv := startReceiver(t)
		checkTracing(t, recv, fmt.Sprintf("{enabled: true, endpoint: %q, sample_ratio: 1}", recv.url))
	})
	t.Run("otlp-grpc", func(t *testing.T) {
		recv := startGRPCReceiver(t)
		checkTracing(t, recv, fmt.Sprintf("{enabled: true, exporter: otlp-grpc, endpoint: %q, insecure: true}", recv.url))
	})
}

// checkTracing runs TestTracingEndToEnd's calls through a router whose tracing
// section is tracingYAML, exporting to recv, and checks what arrived.
func checkTracing(t *testing.T, recv *otlpReceiver, tracingYAML string) {
	backendURL, saw := startSeenBackend(t)
	cfg, err := app.ParseConfig([]byte(fmt.Sprintf(`listen: 127.0.0.1:0
tracing: %s
backends:
  - name: b
    prefix: ""
    url: %s
`, tracingYAML, backendURL)))
	if err != nil {
		t.Fatal(err)
	}
	a := startRouter(t, cfg)
	if a.Tracer == nil {
		t.Fatal("tracing.enabled did not start a tracer")
	}
	c := newRawClient(t, a.URL())

	const (
		traceH = "4bf92f3577b34da6a3ce929d0e0e4736" // in the HTTP header
		traceM = "0af7651916cd43dd8448eb211c80319c" // in params._meta
		traceE = "5b8efff798038103d269b633813fc60c" // a call that fails
		parent = "00f067aa0ba902b7"
	)
	if r := c.post(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`,
		"traceparent", "00-"+traceH+"-"+parent+"-01", "tracestate", "congo=t61rcWkgMzE"); r["result"] == nil {
		t.Fatalf("tools/call: %v", r)
	}
	if r := c.post(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"},"_meta":{"traceparent":"00-` + traceM + `-` + parent + `-01"}}}`); r["result"] == nil {
		t.Fatalf("tools/call: %v", r)
	}
	if r := c.post(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"fail_rpc","arguments":{"code":-32042},"_meta":{"traceparent":"00-` + traceE + `-` + parent + `-01"}}}`); r["error"] == nil {
		t.Fatalf("fail_rpc: %v", r)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := a.Tracer.ForceFlush(ctx); err != nil {
		t.Fatal(err)
	}

	if !recv.has("initialize") {
		t.Error("no span for the initialize the router answered itself")
	}
	seen := saw.all()
	if len(seen) != 3 {
		t.Fatalf("the backend saw %d tools/call, want 3", len(seen))
	}
	for i, trace := range []string{traceH, traceM, traceE} {
		spans := recv.trace(trace)
		srv, call := serverAndCall(spans)
		if len(spans) != 2 || srv == nil || call == nil {
			t.Fatalf("trace %s: %d spans (server %v, client %v), want a server span and a backend call", trace, len(spans), srv != nil, call != nil)
		}
		if hex.EncodeToString(srv.ParentSpanId) != parent {
			t.Errorf("trace %s: the server span's parent is %x, want the client's %s", trace, srv.ParentSpanId, parent)
		}
		if !bytes.Equal(call.ParentSpanId, srv.SpanId) {
			t.Errorf("trace %s: the backend call is not the server span's child", trace)
		}
		want := "00-" + trace + "-" + hex.EncodeToString(call.SpanId) + "-01"
		if seen[i].header != want || seen[i].meta != want {
			t.Errorf("trace %s: the backend saw traceparent %q in the header and %q in _meta, want %q in both", trace, seen[i].header, seen[i].meta, want)
		}
		tool := "echo"
		if trace == traceE {
			tool = "fail_rpc"
		}
		for k, v := range map[string]string{
			"mcp.method.name": "tools/call", "gen_ai.tool.name": tool, "mcprouter.backend": "b",
			"mcp.protocol.version": "2025-06-18", "jsonrpc.request.id": fmt.Sprint(i + 2),
		} {
			if got := attr(srv, k); got != v {
				t.Errorf("trace %s: server span %s = %q, want %q", trace, k, got, v)
			}
		}
		if srv.Name != "tools/call "+tool || attr(srv, "mcp.session.id") == "" {
			t.Errorf("trace %s: server span %q, session %q", trace, srv.Name, attr(srv, "mcp.session.id"))
		}
		if attr(call, "mcprouter.instance") != backendURL {
			t.Errorf("trace %s: instance %q, want %q", trace, attr(call, "mcprouter.instance"), backendURL)
		}
		outcome, code := "ok", ""
		if trace == traceE {
			outcome, code = "error", "-32042"
		}
		for _, s := range []*tracepb.Span{srv, call} {
			if attr(s, "mcprouter.outcome") != outcome || attr(s, "rpc.response.status_code") != code {
				t.Errorf("trace %s: span %q outcome %q code %q, want %q %q", trace, s.Name, attr(s, "mcprouter.outcome"), attr(s, "rpc.response.status_code"), outcome, code)
			}
			if failed := s.Status.GetCode() == tracepb.Status_STATUS_CODE_ERROR; failed != (code != "") {
				t.Errorf("trace %s: span %q status %v", trace, s.Name, s.Status)
			}
		}
	}
}
